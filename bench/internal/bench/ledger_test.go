package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// requirePostgres finds PostgreSQL's server programs, or skips the test
// where they are not installed; in CI (CI=true) their absence fails it.
func requirePostgres(t *testing.T) *pgBinaries {
	t.Helper()
	bin, err := findPostgres()
	if errors.Is(err, ErrNoPostgres) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// ledgerTestStack is a stack with an embedded NATS server and nothing else:
// what the ledger reference needs.
func ledgerTestStack(t *testing.T) *stack {
	t.Helper()
	o := &Options{Timeout: 2 * time.Minute, Status: io.Discard, PublishBatch: 100, Log: slog.New(slog.DiscardHandler)}
	s := &stack{o: o, log: o.Log, url: testenv.NATS(t), topo: o.topology()}
	var err error
	if s.nc, err = s.connect("ledger-test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.nc.Close)
	if s.js, err = jetstream.New(s.nc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := topology.Ensure(ctx, s.js, s.topo); err != nil {
		t.Fatal(err)
	}
	return s
}

func startTestCluster(t *testing.T, bin *pgBinaries, conns int) *pgCluster {
	t.Helper()
	pg, err := startPostgres(context.Background(), bin, conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.stop)
	return pg
}

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		inserted      bool
		digest, first string
		want          string
	}{
		{true, "sha256:a", "sha256:a", document.OutcomeCreated},
		{false, "sha256:a", "sha256:a", document.OutcomeReplayed},
		{false, "sha256:b", "sha256:a", document.OutcomeConflict},
	} {
		if got := decide(c.inserted, c.digest, c.first); got != c.want {
			t.Errorf("decide(%v, %s, %s) = %s, want %s", c.inserted, c.digest, c.first, got, c.want)
		}
	}
}

// In a known order, through one handler: a first send is created, the same
// bytes again are replayed, a changed request under the same intent id is
// an idempotency conflict and leaves the first record as it was; the ledger
// holds one row per distinct intent, and every outcome of an intent names
// the same task.
func TestLedgerReferenceDecidesAsTheService(t *testing.T) {
	bin := requirePostgres(t)
	s := ledgerTestStack(t)
	pg := startTestCluster(t, bin, 4)

	g, err := newGenerator(workloadSpec{Prefix: "ledger-test", Key: scenario.TestKey(), Now: time.Now(), ApprovalTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	env := func(i, variant int) []byte {
		b, _, err := g.envelope(i, variant)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, aChanged, b, c := env(1, 0), env(1, 1), env(2, 0), env(3, 0)
	w := &Workload{Distinct: 3, EnvelopeBytes: len(a)}
	want := []string{}
	add := func(e []byte, outcome string) {
		intent, _, _, _, err := ledgerIDs(e)
		if err != nil {
			t.Fatal(err)
		}
		w.Envelopes = append(w.Envelopes, e)
		w.Subjects = append(w.Subjects, subjects.Approval("", intent))
		want = append(want, outcome)
	}
	add(a, document.OutcomeCreated)
	add(a, document.OutcomeReplayed)
	add(aChanged, document.OutcomeConflict)
	add(b, document.OutcomeCreated)
	add(c, document.OutcomeCreated)
	add(aChanged, document.OutcomeConflict)
	add(b, document.OutcomeReplayed)
	add(a, document.OutcomeReplayed)

	run, err := s.ledgerReference(context.Background(), pg, w, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !run.ok() {
		t.Fatalf("the ledger's check failed: %s", run.summary())
	}
	for i, res := range run.results {
		if res.outcome != want[i] {
			t.Errorf("message %d: %s, want %s", i+1, res.outcome, want[i])
		}
	}
	if run.rows != 3 || run.outcomes[document.OutcomeCreated] != 3 || run.outcomes[document.OutcomeReplayed] != 3 || run.outcomes[document.OutcomeConflict] != 2 {
		t.Errorf("outcome table: %s", run.summary())
	}
	if run.ref == nil || run.ref.n != len(w.Envelopes) || run.ref.took <= 0 {
		t.Errorf("no figure: %+v", run.ref)
	}

	// The first record is the original request's, conflicts did not touch it.
	intentA, digestA, requestA, _, _ := ledgerIDs(a)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var digest, request string
	if err := conn.QueryRow(ctx, "SELECT request_digest, request_id FROM intents WHERE intent_id = $1", intentA).Scan(&digest, &request); err != nil {
		t.Fatal(err)
	}
	if digest != digestA || request != requestA {
		t.Errorf("the first record of %s is %s %s, want the original %s %s", intentA, request, digest, requestA, digestA)
	}
	// The digest is the request's canonical digest, as the pipeline's.
	parts, err := document.SplitEnvelope(a)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := canon.DigestValue(parts.Request); d != digestA {
		t.Errorf("the ledger's digest %s is not the request's canonical digest %s", digestA, d)
	}
}

// A generated workload (resends and changed requests, shuffled) through two
// instances of 16 handlers with a pool of 8 connections each: one row and
// one created per distinct intent, and the rest replayed or in conflict.
func TestLedgerReferenceUnderConcurrency(t *testing.T) {
	bin := requirePostgres(t)
	s := ledgerTestStack(t)
	pg := startTestCluster(t, bin, 2*8)
	w, err := generate(workloadSpec{N: 300, Resend: 0.2, Conflict: 0.1, Prefix: "ledger-conc", Key: scenario.TestKey(),
		Now: time.Now(), ApprovalTimeout: time.Hour, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.ledgerReference(context.Background(), pg, w, 2, 16, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !run.ok() {
		t.Fatalf("the ledger's check failed: %s", run.summary())
	}
	created, replayed, conflict := run.outcomes[document.OutcomeCreated], run.outcomes[document.OutcomeReplayed], run.outcomes[document.OutcomeConflict]
	if run.rows != w.Distinct || created != w.Distinct || created+replayed+conflict != len(w.Envelopes) || replayed < w.Resends/2 || conflict < w.Conflicts {
		t.Errorf("outcome table for %d distinct, %d resends, %d changed: %s", w.Distinct, w.Resends, w.Conflicts, run.summary())
	}
}

// With --ledger off, or without PostgreSQL in auto mode, the reference is
// skipped with a line that says why.
func TestLedgerSkippedSaysWhy(t *testing.T) {
	rep := &report{}
	s := &stack{o: &Options{Ledger: LedgerOff, Status: io.Discard}}
	if err := measureLedger(context.Background(), s, &stages{w: io.Discard}, rep); err != nil {
		t.Fatal(err)
	}
	if rep.ledger != nil || rep.ledgerSkipped != "not measured (--ledger off)" {
		t.Fatalf("ledger %v, skipped %q", rep.ledger, rep.ledgerSkipped)
	}

	// Nowhere to find it.
	t.Setenv("PATH", t.TempDir())
	debian := pgDebianBinDirs
	pgDebianBinDirs = "/nonexistent/postgresql/*/bin"
	t.Cleanup(func() { pgDebianBinDirs = debian })
	rep = &report{}
	s.o.Ledger = LedgerAuto
	if err := measureLedger(context.Background(), s, &stages{w: io.Discard}, rep); err != nil {
		t.Fatal(err)
	}
	if rep.ledgerSkipped == "" {
		t.Fatal("no line says the ledger was skipped")
	}
	s.o.Ledger = LedgerOn
	if err := measureLedger(context.Background(), s, &stages{w: io.Discard}, &report{}); !errors.Is(err, ErrNoPostgres) {
		t.Fatalf("--ledger on without PostgreSQL: %v", err)
	}
}
