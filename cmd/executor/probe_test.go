package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

var updateProbe = flag.Bool("update-probe", false, "rewrite testdata/probe-embedded.golden from a run of probe --embedded")

// runProbeCmd runs "executor probe" with args and returns its output and
// error.
func runProbeCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, append([]string{"probe"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestProbeJudgesTheFakeTaskService(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   embedded.StackOptions
		want   map[string]probe.Status
		safe   bool
		seen   map[string]string // row → text its Seen must hold
		reason []string          // texts the verdict must hold
	}{
		{
			name: "the fake task service answers every row safely and the verdict is safe",
			want: map[string]probe.Status{probe.RowRetry: probe.Safe, probe.RowConflict: probe.Safe, probe.RowConcurrent: probe.Safe,
				probe.RowLostReply: probe.Safe, probe.RowAfterDelete: probe.Safe, probe.RowScope: probe.Safe},
			safe: true,
			seen: map[string]string{
				probe.RowRetry:       "created fake-task-0001, then replayed fake-task-0001; 1 task for the intent",
				probe.RowAfterDelete: "created fake-task-0005 and deleted it; the retry: replayed fake-task-0005 (task deleted); 0 tasks for the intent",
				probe.RowConcurrent:  "16 calls at once: 1 created, 15 replayed, one task id fake-task-0003; 1 task for the intent",
				probe.RowLostReply:   "the retry: replayed fake-task-0004; 1 task for the intent",
			},
			reason: []string{"safe for at-least-once delivery"},
		},
		{
			name: "the fake task service in its broken create-on-every-call mode is unsafe, and the verdict names the rows",
			opts: embedded.StackOptions{UnsafeCreateEveryCall: true},
			want: map[string]probe.Status{probe.RowRetry: probe.Unsafe, probe.RowConflict: probe.Unsafe, probe.RowConcurrent: probe.Unsafe,
				probe.RowLostReply: probe.Unsafe, probe.RowAfterDelete: probe.Caveat, probe.RowScope: probe.Safe},
			seen: map[string]string{
				probe.RowRetry: "created fake-task-0001, then created fake-task-0002; 2 tasks for the intent",
				// It creates on every call, so a resend after a delete creates again.
				probe.RowAfterDelete: "deleted it; the retry: created",
				probe.RowConcurrent:  "16 calls at once: 16 created, 0 replayed, 16 task ids; 16 tasks for the intent",
			},
			reason: []string{"unsafe for at-least-once delivery",
				"a resend of the same approval creates a second task (second call, same key and body)",
				"concurrent deliveries of one approval create more than one task (N concurrent calls, one key)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.StartWith(t, tc.opts)
			out, errOut, err := runProbeCmd(t, "--server", env.URL(), "--yes", "--json")
			if tc.safe && err != nil || !tc.safe && (exitCode(err) != 1 || !errors.Is(err, errSilent)) {
				t.Fatalf("probe ended with %v (exit %d)\n%s%s", err, exitCode(err), out, errOut)
			}
			var rep probe.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("probe --json printed %q: %v", out, err)
			}
			got := map[string]probe.Status{}
			for _, r := range rep.Rows {
				got[r.ID] = r.Status
				if want, ok := tc.seen[r.ID]; ok && !strings.Contains(r.Seen, want) {
					t.Errorf("row %s saw %q, want it to hold %q", r.ID, r.Seen, want)
				}
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("row %s is %s, want %s", id, got[id], want)
				}
			}
			if rep.Verdict.Safe != tc.safe {
				t.Errorf("verdict safe = %v, want %v: %s", rep.Verdict.Safe, tc.safe, rep.Verdict.Summary)
			}
			for _, want := range tc.reason {
				if !strings.Contains(rep.Verdict.Summary, want) {
					t.Errorf("verdict %q lacks %q", rep.Verdict.Summary, want)
				}
			}
			// The service's own count of requests agrees with the report's.
			if c := env.Counts(); c.RequestsReceived != rep.Calls {
				t.Errorf("the service received %d requests, the report says %d calls", c.RequestsReceived, rep.Calls)
			}
		})
	}
}

func TestProbeWithoutYesSendsNothing(t *testing.T) {
	env := testenv.Start(t)
	before := env.Counts()
	out, errOut, err := runProbeCmd(t, "--server", env.URL())
	if exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("probe without --yes ended with %v (exit %d), want exit 1 naming --yes", err, exitCode(err))
	}
	if out != "" {
		t.Errorf("probe without --yes printed a report:\n%s", out)
	}
	expectLines(t, "the plan", errOut, "create calls to the fake task service", "starting \"probe-", "creates 5 tasks", "It deletes 1 task of its own again", "Run again with --yes")
	if after := env.Counts(); after != before {
		t.Errorf("the service's counters went from %+v to %+v without --yes", before, after)
	}
}

func TestProbeAgainstAServiceWithoutFaultsDoesNotProveItSafe(t *testing.T) {
	// An ordinary service: no fault switch, so no reply can be lost.
	st, err := embedded.StartStack(embedded.StackOptions{Dir: t.TempDir(), Port: -1, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	out, errOut, err := runProbeCmd(t, "--server", st.URL(), "--yes")
	if exitCode(err) != 1 || !errors.Is(err, errSilent) {
		t.Fatalf("probe ended with %v (exit %d), want exit 1\n%s%s", err, exitCode(err), out, errOut)
	}
	expectLines(t, "the report", out,
		"a lost reply, then a retry: a lost reply could not be arranged: the fake task service has no fault switch",
		"verdict: not proven safe for at-least-once delivery",
		"  - not measured: a lost reply, then a retry",
	)
}

func TestProbeRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one call at once is not concurrency", []string{"--embedded", "--concurrency", "1"}, "--concurrency 1"},
		{"an unknown task service is named", []string{"--task-service", "jira"}, `--task-service "jira"`},
		{"embedded goes with no server", []string{"--embedded", "--server", "nats://127.0.0.1:1"}, "--embedded"},
		{"the timeout must be positive", []string{"--embedded", "--timeout", "0s"}, "--timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runProbeCmd(t, tc.args...)
			if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("probe %v ended with %v (exit %d), want a usage error naming %q", tc.args, err, exitCode(err), tc.want)
			}
		})
	}
}

func TestProbeHelpExplainsConsentAndTheRows(t *testing.T) {
	_, errOut, err := runProbeCmd(t, "--help")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("probe --help: %v", err)
	}
	expectLines(t, "help", errOut, "--yes", "probe-<run id>-", "never touches", "--embedded", "lost reply", "-task-service", "Exit status")
}

// The table of a real run of probe --embedded, with the run id and the store
// id (random in each run) replaced.
func TestProbeEmbeddedPrintsTheGoldenTable(t *testing.T) {
	out, errOut, err := runProbeCmd(t, "--embedded", "--yes")
	if err != nil {
		t.Fatalf("probe --embedded --yes: %v\n%s%s", err, out, errOut)
	}
	got := regexp.MustCompile(`probe-[0-9a-f]{16}-`).ReplaceAllString(out, "probe-RUNID-")
	got = regexp.MustCompile(`store-[0-9a-f]+`).ReplaceAllString(got, "store-ID")
	path := filepath.Join("testdata", "probe-embedded.golden")
	if *updateProbe {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/executor -run TestProbeEmbeddedPrintsTheGoldenTable -update-probe writes it)", err)
	}
	if got != string(want) {
		t.Errorf("probe --embedded printed, unlike %s (-update-probe rewrites it):\n%s", path, got)
	}
}
