package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func TestVerifyCommandFailsOnADirectCreateUnlessCallsFromOutsideAreAllowed(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := demo.SendAndWait(ctx, env.JS, s.Original.Envelope(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	v, err := gate.CheckBindings(s.NewIntent.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	// A request of its own for an intent no approval names, as the
	// service requires of every create.
	q := *v.Request
	q.IntentID = "intent-outside"
	doc, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	req, err := provider.RequestFor(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Service.Create(ctx, req); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"verify", "--server", env.URL()}, &out, &errOut)
	if err == nil {
		t.Fatalf("verify passed after a direct create:\n%s", out.String())
	}
	expectLines(t, "the report", out.String(), "window: APPROVALS sequences 1 to 1, 1 messages", "FAIL 7.", "came from outside the executors")
	// No executor ran serve here, so nothing recorded the service: verify
	// says that it takes the fake one.
	if want := "no record of the executors' task service"; !strings.Contains(errOut.String(), want) {
		t.Errorf("verify without a record does not say %q:\n%s", want, errOut.String())
	}

	out.Reset()
	if err := run(context.Background(), []string{"verify", "--server", env.URL(), "--allow-external", "1", "--json"}, &out, &errOut); err != nil {
		t.Fatalf("verify --allow-external 1: %v\n%s%s", err, out.String(), errOut.String())
	}
	var rep audit.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Window.FirstSeq != 1 || rep.Window.LastSeq != 1 || rep.Window.Messages != 1 || len(rep.Checks) != 14 ||
		rep.Service.StoreID != env.Stack.Store.ID() {
		t.Fatalf("report %+v", rep)
	}
	if got := strings.Join(rep.Gate.NotChecked, ","); got != "signature,expiry,scope" {
		t.Errorf("without trusted approvers, not checked %q", got)
	}
}

func TestVerifyCommandRefusesUnsignedAllowedWithoutTrustedApprovers(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"verify", "--insecure-allow-unsigned"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "needs --trusted-approvers") {
		t.Fatalf("err %v", err)
	}
}
