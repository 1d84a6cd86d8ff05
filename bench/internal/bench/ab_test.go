package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The A/B comparison reads the drain table that the report writes, so
// the two are tested together: a change of the table's columns breaks
// this test, not a comparison on someone's machine.
func TestTheDrainRowIsReadBackFromTheReportsOwnTable(t *testing.T) {
	r := goldenReport()
	var b bytes.Buffer
	r.writeReferences(&b)
	r.writeDrains(&b)
	d, err := parseDrainRow(b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	// The first drain: 4000 in 1 s, 600 ms of this process's CPU and 140 ms
	// of the service's: 185 µs per approval, 35 of them the service's.
	want := abDrain{took: time.Second, perSecond: 4000, cpu: 185, service: 35}
	if d != want {
		t.Errorf("read %+v, want %+v", d, want)
	}

	r.drains = r.drains[1:] // CPU without a service process of its own
	b.Reset()
	r.writeDrains(&b)
	if d, err = parseDrainRow(b.String()); err != nil {
		t.Fatal(err)
	}
	if want := (abDrain{took: 500 * time.Millisecond, perSecond: 8000, cpu: 175}); d != want {
		t.Errorf("read %+v, want %+v", d, want)
	}
}

func TestAReportWithoutADrainRowIsRefused(t *testing.T) {
	for name, report := range map[string]string{
		"empty":                   "",
		"live only":               "live (latency ...):\n  100/s  99.6/s  1  100  2ms\n",
		"a drain without its CPU": "  0  1  4000  1573 B  1s  4,000  -  -  -  -  1.00  -  -  ok\n",
	} {
		t.Run(name, func(t *testing.T) {
			if d, err := parseDrainRow(report); err == nil {
				t.Errorf("read %+v from a report without a drain row", d)
			}
		})
	}
}

func TestSpreadIsTheMedianAndTheRange(t *testing.T) {
	cpu := func(v ...float64) []abDrain {
		out := make([]abDrain, len(v))
		for i, c := range v {
			out[i].cpu = c
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		runs        []abDrain
		med, lo, hi float64
	}{
		{"one run", cpu(120), 120, 120, 120},
		{"an odd count takes the middle one", cpu(130, 110, 125), 125, 110, 130},
		{"an even count takes the mean of the middle two", cpu(130, 110, 125, 100), 117.5, 100, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			med, lo, hi := spread(tc.runs, func(d abDrain) float64 { return d.cpu })
			if med != tc.med || lo != tc.lo || hi != tc.hi {
				t.Errorf("spread = %v (%v–%v), want %v (%v–%v)", med, lo, hi, tc.med, tc.lo, tc.hi)
			}
		})
	}
}

func TestTheSummaryGivesMediansRatiosAndThePairsWhereBIsLower(t *testing.T) {
	a := []abDrain{
		{took: 2 * time.Second, perSecond: 10000, cpu: 200, service: 50},
		{took: 2200 * time.Millisecond, perSecond: 9091, cpu: 220, service: 52},
		{took: 1800 * time.Millisecond, perSecond: 11111, cpu: 180, service: 48},
	}
	b := []abDrain{
		{took: 1800 * time.Millisecond, perSecond: 11111, cpu: 180, service: 40},
		{took: 2300 * time.Millisecond, perSecond: 8696, cpu: 230, service: 42},
		{took: 1600 * time.Millisecond, perSecond: 12500, cpu: 160, service: 38},
	}
	var out bytes.Buffer
	writeAB(&out, ABOptions{A: "/a", B: "/b", Pairs: 3, Args: []string{"--approvals", "20000"}}, [2][]abDrain{a, b})
	for _, want := range []string{
		"A: /a\nB: /b\n3 alternating pairs of: bench backlog --embedded --no-references --executors 1 --approvals 20000",
		"2.00 (1.80–2.20)", "200 (180–220)", "50 (48–52)", // A's medians and ranges
		"1.80 (1.60–2.30)", "180 (160–230)", "40 (38–42)", // B's
		"0.90×", "0.80×", // B/A: drain and CPU 0.90, service 0.80
		"2 of 3", "3 of 3", // B lower in two pairs of three on drain and CPU, in all three on the service
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestAComparisonRefusesWhatIsNotTwoBuilds(t *testing.T) {
	notExec := t.TempDir()
	for _, name := range []string{"bench", "provider"} {
		if err := os.WriteFile(filepath.Join(notExec, name), []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(t.TempDir(), "nothing-here")
	for _, tc := range []struct {
		name string
		o    ABOptions
		want string
	}{
		{"no pairs", ABOptions{A: notExec, B: notExec, Pairs: 0}, "--pairs 0"},
		{"a directory that does not exist", ABOptions{A: missing, B: notExec, Pairs: 1}, "go build -o DIR/"},
		{"files that cannot run", ABOptions{A: notExec, B: notExec, Pairs: 1}, "is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := RunAB(context.Background(), tc.o, &out)
			if !errors.Is(err, ErrAB) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrAB saying %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed %q before refusing", out.String())
			}
		})
	}
}
