package main

import (
	"regexp"
	"strings"
	"testing"
)

// A small backlog run as its own process, with the task service in a
// process of its own: the three references are measured and printed, the drains
// with one and two executors pass the check, and the service's memory is
// reported.
func TestBenchBacklogMeasuresAndChecks(t *testing.T) {
	r := publisher(t, nil, "bench", "--embedded", "--approvals", "300", "--executors", "1,2", "--ref-approvals", "200",
		"--concurrency", "16", "--resend", "0.2", "--conflict", "0.1")
	r.expect(t, 0)
	for _, want := range []string{
		"naive JetStream    200 in",
		"batched JetStream  200 in",
		"Pebble alone",
		"backlog drains",
		"task service process (store with 0 intents preloaded, after the drains): resident memory",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, r.stdout)
		}
	}
	// One row per executor count, each checked: every approval has its
	// receipt and the creates equal the distinct intents (300 less 20%
	// resends and 10% changed requests).
	rows := regexp.MustCompile(`(?m)^  0\s+([12])\s+300\s.*ok: 300/300 with receipt; creates 210 = distinct intents 210`).FindAllStringSubmatch(r.stdout, -1)
	if len(rows) != 2 {
		t.Fatalf("want two checked rows (1 and 2 executors):\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "stage drain (0 stored intents, 2 executor(s))") {
		t.Errorf("no time per stage on stderr:\n%s", r.stderr)
	}
}

// A short live run: latency percentiles and the check.
func TestBenchLiveReportsLatency(t *testing.T) {
	r := publisher(t, nil, "bench", "live", "--embedded", "--service-in-process", "--no-references",
		"--rate", "40", "--duration", "1s", "--publishers", "2")
	r.expect(t, 0)
	if !regexp.MustCompile(`(?m)^  40/s\s+\d+/s\s+1\s+40\s+[0-9.]+ ms\s+[0-9.]+ ms\s+[0-9.]+ ms\s+[0-9.]+ ms\s+[0-9.]+\s+ok: 40/40 with receipt`).MatchString(r.stdout) {
		t.Fatalf("no checked live row for 40/s:\n%s", r.stdout)
	}
}

func TestBenchRefusesBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--embedded", "--rate", "fast"},
		{"bench", "sideways", "--embedded"},
		{"bench", "--embedded", "--executors", "one"},
	} {
		publisher(t, nil, args...).expect(t, 2)
	}
	// Preloading needs the store in hand.
	publisher(t, nil, "bench", "--server", "nats://127.0.0.1:1", "--preload", "10").expect(t, 1)
}
