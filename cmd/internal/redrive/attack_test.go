package redrive_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// runRedrive runs redrive against url with args and --json, and returns
// its report.
func runRedrive(t *testing.T, url string, args ...string) (redrive.Report, error) {
	t.Helper()
	fs := flag.NewFlagSet("redrive", flag.ContinueOnError)
	fs.Usage = func() {}
	cf := redrive.FlagsVar(fs)
	if err := fs.Parse(append([]string{"--server", url, "--json"}, args...)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	err := redrive.Run(ctx, cf, &out)
	var rep redrive.Report
	if jerr := json.Unmarshal([]byte(out.String()), &rep); jerr != nil {
		t.Fatalf("redrive %v printed %q: %v", args, out.String(), jerr)
	}
	return rep, err
}

// redriveOne runs redrive as runRedrive does and returns its one dead
// letter, failing the test unless it ran and reported exactly one.
func redriveOne(t *testing.T, url string, args ...string) *redrive.ReportItem {
	t.Helper()
	rep, err := runRedrive(t, url, args...)
	if err != nil || len(rep.Items) != 1 {
		t.Fatalf("redrive %v reported %d dead letters (%+v): %v; want one", args, len(rep.Items), rep, err)
	}
	return rep.Items[0]
}

func TestATenantsJunkMarkedAsRedrivesDoesNotMakeRedriveAllSkipAnothersDeadLetter(t *testing.T) {
	env := testenv.Start(t)
	payload := seedEnvelope(t)
	dlSeq := storeDeadLetter(t, env.JS, payload, "1")
	// Twenty junk messages naming every dead letter up to 20 as redriven.
	for i := 1; i <= 20; i++ {
		publishAsTenant(t, env.JS, fmt.Sprintf("junk-%d", i), redrive.HeaderRedriveOf, fmt.Sprint(i))
	}
	it := redriveOne(t, env.URL(), "--all")
	if it.DeadLetterSeq != dlSeq || it.Action != "redriven" || it.NewApprovalSeq == 0 {
		t.Fatalf("redrive --all: %+v; want dead letter %d redriven", it, dlSeq)
	}
	if m := approvalAt(t, env.JS, it.NewApprovalSeq); string(m.Data) != string(payload) {
		t.Fatalf("approvals message %d holds %q, want the dead letter's envelope", it.NewApprovalSeq, m.Data)
	}
}

func TestATenantThatPublishesTheRedrivesMessageIDFirstDoesNotStopTheRedrive(t *testing.T) {
	env := testenv.Start(t)
	payload := seedEnvelope(t)
	dlSeq := storeDeadLetter(t, env.JS, payload, "7")
	// The id redrive used to give a redrive of this dead letter.
	squat := publishAsTenant(t, env.JS, "squat", msgIDHeader, fmt.Sprintf("redrive-%d-of-7", dlSeq))
	before := approvalsMsgs(t, env.JS)
	it := redriveOne(t, env.URL(), "--seq", fmt.Sprint(dlSeq))
	if it.Action != "redriven" || it.NewApprovalSeq == 0 || it.NewApprovalSeq == squat {
		t.Fatalf("redrive --seq %d: %+v; want it redriven as a new message (the tenant's is %d)", dlSeq, it, squat)
	}
	if after := approvalsMsgs(t, env.JS); after != before+1 {
		t.Fatalf("APPROVALS went from %d to %d messages, want one more", before, after)
	}
	if m := approvalAt(t, env.JS, it.NewApprovalSeq); string(m.Data) != string(payload) {
		t.Fatalf("approvals message %d holds %q, want the dead letter's envelope", it.NewApprovalSeq, m.Data)
	}
}

func TestASecondRedriveIsRefusedBySeqAndSkippedByAllAfterTheApprovalIsGoneUnlessForced(t *testing.T) {
	env := testenv.Start(t)
	dlSeq := storeDeadLetter(t, env.JS, seedEnvelope(t), "1")
	seq := fmt.Sprint(dlSeq)
	first := redriveOne(t, env.URL(), "--seq", seq)
	if first.Action != "redriven" {
		t.Fatalf("the first redrive: %+v", first)
	}
	// The republished message leaves APPROVALS, as it does once the
	// stream's MaxAge has passed: the record still says it was redriven.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := env.JS.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, first.NewApprovalSeq); err != nil {
		t.Fatal(err)
	}
	before := approvalsMsgs(t, env.JS)
	rep, err := runRedrive(t, env.URL(), "--seq", seq)
	if want := fmt.Sprintf("already redriven as approvals message %d; nothing published", first.NewApprovalSeq); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a second redrive --seq %s: %+v, %v; want refused with %q", seq, rep, err, want)
	}
	if it := redriveOne(t, env.URL(), "--all"); it.Action != "skipped" {
		t.Fatalf("redrive --all after the first: %+v; want skipped", it)
	}
	if after := approvalsMsgs(t, env.JS); after != before {
		t.Fatalf("APPROVALS went from %d to %d messages; want nothing published", before, after)
	}
	forced := redriveOne(t, env.URL(), "--seq", seq, "--force")
	if forced.Action != "redriven" || forced.NewApprovalSeq <= first.NewApprovalSeq {
		t.Fatalf("redrive --force: %+v; want redriven again as a new message", forced)
	}
	it := redriveOne(t, env.URL(), "--all")
	if it.Action != "skipped" || fmt.Sprint(it.RedrivenAs) != fmt.Sprint([]uint64{first.NewApprovalSeq, forced.NewApprovalSeq}) {
		t.Fatalf("redrive --all after --force: %+v; want skipped, redriven as %d and %d", it, first.NewApprovalSeq, forced.NewApprovalSeq)
	}
}
