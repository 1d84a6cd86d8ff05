package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// A small backlog run as its own process, with the task service in a
// process of its own: the references are measured and printed (the PostgreSQL ledger where it is installed), the drains
// with one and two executors pass the check, and the service's memory is
// reported.
func TestBenchBacklogMeasuresAndChecks(t *testing.T) {
	r := benchCmd(t, "--embedded", "--provider-bin", buildProvider(t), "--approvals", "300", "--executors", "1,2", "--ref-approvals", "200",
		"--concurrency", "16", "--resend", "0.2", "--conflict", "0.1")
	r.expect(t, 0)
	for _, want := range []string{
		`naive JetStream\s+200 in`,
		`batched JetStream\s+200 in`,
		`Pebble alone`,
		`backlog drains`,
		`× naive\s+× batched\s+× ledger\s+× Pebble`,
		`task service process \(store with 0 intents preloaded, after the drains\): resident memory`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("the report lacks %q:\n%s", want, r.stdout)
		}
	}
	// The conventional peer: measured on a private PostgreSQL cluster, with
	// its own check, or, where PostgreSQL is not installed, skipped with a
	// line saying so (never in CI, which installs it).
	measured := regexp.MustCompile(`(?m)^  JetStream \+ PostgreSQL ledger\s+200 in .*\n  \(ledger check: ok: created \d+, replayed \d+, idempotency_conflict \d+; 140 rows = distinct intents 140\)`).MatchString(r.stdout)
	skipped := strings.Contains(r.stdout, "JetStream + PostgreSQL ledger: skipped: no PostgreSQL found")
	switch {
	case measured:
	case skipped && os.Getenv("CI") != "true":
		t.Log("PostgreSQL is not installed: the ledger reference was skipped")
	default:
		t.Errorf("the ledger reference is neither measured and checked nor skipped with a reason:\n%s", r.stdout)
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

// buildProvider builds the provider command, which serves the task service
// of an embedded run in its own process, and returns its path.
func buildProvider(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "provider")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sendtwice/sendtwice/cmd/provider").CombinedOutput()
	if err != nil {
		t.Fatalf("building the provider command: %v\n%s", err, out)
	}
	return bin
}

// Without a provider command beside the bench or on $PATH, an embedded
// run with the service in its own process says how to get one, before it
// starts anything.
func TestBenchWithoutAProviderCommandSaysHowToBuildOne(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := benchCmd(t, "--embedded", "--approvals", "10", "--no-references")
	r.expect(t, 1)
	if !strings.Contains(r.stderr, "go build ./cmd/provider") || !strings.Contains(r.stderr, "--provider-bin") {
		t.Errorf("the error does not say how to get a provider command:\n%s", r.stderr)
	}
	r = benchCmd(t, "--embedded", "--provider-bin", filepath.Join(t.TempDir(), "provider"), "--approvals", "10")
	r.expect(t, 1)
	if !strings.Contains(r.stderr, "--provider-bin") {
		t.Errorf("a missing --provider-bin is not named:\n%s", r.stderr)
	}
}

// A short live run: latency percentiles and the check.
func TestBenchLiveReportsLatency(t *testing.T) {
	r := benchCmd(t, "live", "--embedded", "--service-in-process", "--no-references",
		"--rate", "40", "--duration", "1s", "--publishers", "2")
	r.expect(t, 0)
	if !regexp.MustCompile(`(?m)^  40/s\s+\d+/s\s+1\s+40\s+[0-9.]+ ms\s+[0-9.]+ ms\s+[0-9.]+ ms\s+[0-9.]+ ms\s+[0-9.]+\s+ok: 40/40 with receipt`).MatchString(r.stdout) {
		t.Fatalf("no checked live row for 40/s:\n%s", r.stdout)
	}
	// Where the time goes: each stage of the 40 approvals, from the
	// scheduled publish to the receipt read.
	for _, stage := range []string{"latency per stage at 40/s (40 of 40 approvals", "stored → taken by a handler", "gate (taken → service call)",
		"service call (request → answer)", "receipt queued, stored in a batch, message acked", "total: scheduled → receipt read"} {
		if !strings.Contains(r.stdout, stage) {
			t.Errorf("the live report lacks the stage %q:\n%s", stage, r.stdout)
		}
	}
}

// A short live run whose executors call a CalDAV collection (Radicale)
// instead of the fake task service: the check counts the collection's tasks.
func TestBenchLiveAgainstACalDAVCollection(t *testing.T) {
	dav := davtest.Start(t, davtest.Radicale, davtest.Options{})
	r := benchCmd(t, "live", "--embedded", "--service-in-process", "--no-references",
		"--rate", "20", "--duration", "1s", "--concurrency", "16", "--caldav-url", dav.CollectionURL)
	r.expect(t, 0)
	if !regexp.MustCompile(`(?m)^  20/s\s.*ok: 20/20 with receipt; CalDAV tasks \+(\d+) = distinct intents (\d+);`).MatchString(r.stdout) {
		t.Fatalf("no checked live row for 20/s against the collection:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "the executors call the CalDAV collection "+dav.CollectionURL) {
		t.Errorf("the report does not say the executors called the collection:\n%s", r.stdout)
	}
}

func TestBenchRefusesBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--embedded", "--rate", "fast"},
		{"sideways", "--embedded"},
		{"--embedded", "--executors", "one"},
		{"--embedded", "--ledger", "maybe"},
	} {
		benchCmd(t, args...).expect(t, 2)
	}
	// Preloading needs the store in hand.
	benchCmd(t, "--server", "nats://127.0.0.1:1", "--preload", "10").expect(t, 1)
}

// Against a server that requires a user and password, with the task service
// running there: the bench connects every one of its connections with the
// credentials given, the run passes its check, and the password appears
// nowhere in what it prints, even when it was part of the server URL. A
// wrong password is refused with the server's reason.
func TestBenchAgainstAServerThatRequiresAPassword(t *testing.T) {
	const user, password = "bench", "s3cret-bench-passw0rd"
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), SyncAlways: true,
		Users: []*server.User{{Username: user, Password: password}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the server did not start")
	}
	url := srv.ClientURL()

	nc, err := nats.Connect(url, nats.UserInfo(user, password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h, err := provider.Host(t.TempDir(), provider.Options{Logger: testenv.Logger()}, provider.ServiceConfig{Logger: testenv.Logger()},
		func() (*nats.Conn, error) { return nats.Connect(url, nats.UserInfo(user, password)) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })

	if _, err := nats.Connect(url); err == nil {
		t.Fatal("the server let a client in without credentials; the test would prove nothing")
	}
	noLeak := func(r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Errorf("the password appears in the output:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	}

	t.Setenv("NATS_PASSWORD", password)
	r := benchCmd(t, "--server", url, "--user", user, "--approvals", "60", "--ref-approvals", "30", "--concurrency", "8")
	r.expect(t, 0)
	noLeak(r)
	if !strings.Contains(r.stdout, "ok: 60/60 with receipt") || !regexp.MustCompile(`naive JetStream\s+30 in`).MatchString(r.stdout) {
		t.Errorf("no checked drain or no references:\n%s", r.stdout)
	}

	// The password inside the URL: used, and redacted in the report.
	t.Setenv("NATS_PASSWORD", "")
	withPass := strings.Replace(url, "nats://", "nats://"+user+":"+password+"@", 1)
	r = benchCmd(t, "--server", withPass, "--approvals", "20", "--no-references", "--concurrency", "8")
	r.expect(t, 0)
	noLeak(r)
	if !strings.Contains(r.stdout, "against:   server nats://"+user+":REDACTED@") {
		t.Errorf("the report does not name the server with the password redacted:\n%s", r.stdout)
	}

	t.Setenv("NATS_PASSWORD", "wrong-"+password)
	r = benchCmd(t, "--server", url, "--user", user, "--approvals", "20", "--no-references")
	r.expect(t, 1)
	noLeak(r)
	if !strings.Contains(r.stderr, "Authorization Violation") {
		t.Errorf("a wrong password is not refused with the server's reason:\n%s", r.stderr)
	}
}

// Two builds compared: each directory holds a bench (this test binary, run
// as the command) and a provider. Two pairs of tiny drains, the second pair
// in the other order, then the summary; what is not two builds is refused
// as a usage error before anything runs.
func TestABDrainsEachBuildInTurnAndSummarises(t *testing.T) {
	provider := buildProvider(t)
	build := func() string {
		dir := t.TempDir()
		script := "#!/bin/sh\nexec env " + asMain + "=1 " + os.Args[0] + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, "bench"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(provider, filepath.Join(dir, "provider")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b := build(), build()
	r := benchCmd(t, "ab", "--pairs", "2", "--approvals", "100", a, b)
	r.expect(t, 0)
	order := regexp.MustCompile(`(?m)^pair (\d), ([AB]): drain \S+, [\d,]+/s, \d+ µs \(service \d+ µs\)$`).FindAllStringSubmatch(r.stderr, -1)
	var got []string
	for _, m := range order {
		got = append(got, m[1]+m[2])
	}
	if strings.Join(got, " ") != "1A 1B 2B 2A" {
		t.Errorf("drains in the order %v, want 1A 1B 2B 2A:\n%s", got, r.stderr)
	}
	for _, want := range []string{"A: " + a + "\nB: " + b + "\n", "2 alternating pairs of: bench backlog --embedded --no-references --executors 1 --approvals 100",
		"A median (runs)", "B median (runs)", "B/A of the medians", "pairs where B is lower"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the summary lacks %q:\n%s", want, r.stdout)
		}
	}

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"ab", a}, "want two build directories, A_DIR and B_DIR; got 1 arguments"},
		{[]string{"ab", "--pairs", "0", a, b}, "--pairs 0: want at least 1"},
		{[]string{"ab", "--approvals", "-1", a, b}, "--approvals -1"},
		{[]string{"ab", a, b, "--pairs", "3"}, "--pairs after the build directories: flags go before A_DIR and B_DIR"},
	} {
		r := benchCmd(t, tc.args...)
		r.expect(t, 2)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("bench %s says:\n%s\nwant %q", strings.Join(tc.args, " "), r.stderr, tc.says)
		}
		if strings.Contains(r.stderr, "pair 1") {
			t.Errorf("bench %s ran a drain before refusing:\n%s", strings.Join(tc.args, " "), r.stderr)
		}
	}
}
