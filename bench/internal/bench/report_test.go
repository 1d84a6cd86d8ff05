package bench

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/provider"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestRatioIsATwoDecimalQuotientOrADash(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{3919, 779, "5.03"},
		{3919, 19953, "0.20"},
		{1, 1, "1.00"},
		{0, 779, "-"},
		{3919, 0, "-"},
		{-1, 2, "-"},
	} {
		if got := ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("ratio(%v, %v) = %q; want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestThousandsRoundsAndGroupsByThree(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{999, "999"},
		{999.5, "1,000"},
		{19953.4, "19,953"},
		{1234567, "1,234,567"},
	} {
		if got := thousands(tc.v); got != tc.want {
			t.Errorf("thousands(%v) = %q; want %q", tc.v, got, tc.want)
		}
	}
}

func TestCPUAndBatchCellsSplitPerApproval(t *testing.T) {
	for _, tc := range []struct {
		name       string
		d          drainResult
		cpu, batch string
	}{
		{"the service in its own process is named apart", drainResult{n: 1000, cpu: 150 * time.Millisecond, serviceCPU: 35 * time.Millisecond, batches: 4, batched: 1000},
			"185 µs (service 35 µs)", "250.0 (100% batched)"},
		{"the service in this process is in the total", drainResult{n: 1000, cpu: 150 * time.Millisecond, batches: 10, batched: 900},
			"150 µs", "90.0 (90% batched)"},
		{"nothing measured is a dash", drainResult{}, "-", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cpuString(&tc.d); got != tc.cpu {
				t.Errorf("CPU cell %q; want %q", got, tc.cpu)
			}
			if got := batchString(&tc.d); got != tc.batch {
				t.Errorf("batch cell %q; want %q", got, tc.batch)
			}
		})
	}
}

// okCheck is a check that passed on n messages with distinct intents.
func okCheck(n, distinct int) *checkResult {
	return &checkResult{messages: n, withReceipt: n, receipts: n, distinct: distinct,
		outcomes: map[string]int{"created": distinct, "replayed": n - distinct - 1, "idempotency_conflict": 1},
		delta:    provider.Counts{RequestsReceived: int64(n), CreatesExecuted: int64(distinct), TasksExisting: int64(distinct)}}
}

// goldenReport is a report with every section filled with figures chosen
// so that the ratios are easy to check by hand: the first drain is 4× the
// naive reference and ½ the batched one.
func goldenReport() *report {
	sec := time.Second
	lat := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	failed := okCheck(100, 80)
	failed.withReceipt = 99
	failed.problems = []string{"message 17 (intent \"\") has neither a receipt nor a dead letter"}
	return &report{
		o:       &Options{Mode: Backlog},
		naive:   &reference{name: "naive JetStream", n: 1000, took: sec, unit: "messages/s", what: "1×512 handlers; alone"},
		batched: &reference{name: "batched JetStream", n: 8000, took: sec, unit: "messages/s", what: "1×512 handlers; batched"},
		pebble:  &reference{name: "Pebble alone", n: 16000, took: sec, unit: "requests/s", what: "512 writers"},
		ledger: &ledgerRun{ref: &reference{name: "JetStream + PostgreSQL ledger", n: 500, took: sec, unit: "approvals/s", what: "ledger"},
			outcomes: map[string]int{"created": 425, "replayed": 50, "idempotency_conflict": 25}, rows: 425, distinct: 425},
		drains: []*drainResult{
			{preload: 0, executors: 1, n: 4000, envelope: 1573, took: sec, cpu: 600 * time.Millisecond, serviceCPU: 140 * time.Millisecond, batches: 10, batched: 4000, check: okCheck(4000, 3400)},
			{preload: 0, executors: 2, n: 4000, envelope: 1573, took: 500 * time.Millisecond, cpu: 700 * time.Millisecond, batches: 20, batched: 3000, check: okCheck(4000, 3400)},
		},
		lives: []*liveResult{
			{rate: Rate{PerSecond: 100}, offered: 100, achieved: 99.6, executors: 1, n: 100, lat: lat(2, 3, 4, 5, 40), check: okCheck(100, 85)},
			{rate: Rate{HalfOfMax: true}, offered: 2000, achieved: 1990, executors: 1, n: 100, lat: lat(10, 20), check: failed,
				stagesN: 2, stages: []stageFigure{{name: "service call (request → answer)", lat: lat(1, 3), mean: 2 * time.Millisecond}}},
		},
		memory: []memoryFigure{{preload: 0, after: "the drains", now: 50 << 20, peak: 64 << 20}},
		stages: []stageTime{{"reference: naive JetStream", 1234 * time.Millisecond}, {"drain (0 stored intents, 1 executor(s))", sec}},
	}
}

// The report's sections after its header, against a golden file: the
// references, the drains with their × columns, the live rows and stages,
// the memory, a failed check and the time per stage. (go test -update
// rewrites it.)
func TestReportSectionsMatchTheGoldenFile(t *testing.T) {
	r := goldenReport()
	var b bytes.Buffer
	r.writeReferences(&b)
	r.writeDrains(&b)
	r.writeLives(&b)
	r.writeMemory(&b)
	r.writeFailures(&b)
	r.writeStages(&b)
	golden := filepath.Join("testdata", "report.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the report differs from %s:\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

// The × columns of a drain are its rate over each reference's and over the
// first row's; a reference not measured is a dash.
func TestDrainRowsCarryTheirRatiosToTheReferences(t *testing.T) {
	r := goldenReport()
	r.ledger = nil
	var b bytes.Buffer
	r.writeDrains(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a title, a heading and two rows:\n%s", b.String())
	}
	for i, want := range [][]string{
		{"4,000", "4.00", "0.50", "-", "0.25", "1.00"},
		{"8,000", "8.00", "1.00", "-", "0.50", "2.00"},
	} {
		f := strings.Fields(lines[2+i])
		// stored intents, executors, approvals, envelope (2 fields), drain,
		// then approvals/s and the five × columns.
		if got := f[6:12]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %d: rate and ratios %v; want %v", i+1, got, want)
		}
	}
}

// A run whose check failed is not ok, and the report lists its problems.
func TestAReportWithAFailedCheckIsNotOK(t *testing.T) {
	r := goldenReport()
	if r.ok() {
		t.Fatal("a report with a failed live check is ok")
	}
	r.lives = r.lives[:1]
	if !r.ok() {
		t.Fatal("a report whose checks all passed is not ok")
	}
	r.drains[1].check = nil
	if r.ok() {
		t.Fatal("a drain that was never checked is ok")
	}
}
