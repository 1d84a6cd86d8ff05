package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// executor serve reads a CalDAV collection once before it consumes: a wrong
// password stops it with the server's refusal and takes no message; a server
// that is down at start is waited for, and nothing is lost either way.
func TestServeChecksTheCalDAVLoginBeforeItTakesAMessage(t *testing.T) {
	const user, password = "alice", "pw-3c9e41-not-for-print"
	s := testenv.SeedFor(t, scenario.CalDAV)
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: user, Password: password})
	r := &davRig{env: testenv.Start(t), srv: srv}
	passwordFile := func(pw string) string {
		f := filepath.Join(t.TempDir(), "password")
		if err := os.WriteFile(f, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	login := func(pw string) []string {
		return []string{"--caldav-user", user, "--caldav-password-file", passwordFile(pw)}
	}

	// The approval waits in the stream while the executors are refused.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sent, err := testenv.Publish(ctx, r.env.JS, s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	seq := sent.StreamSeq

	t.Run("a wrong password stops serve with the server's 401 and takes no message", func(t *testing.T) {
		p := r.executor(t, srv.CollectionURL, "exec-wrong", login("not-the-password")...)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("serve with a wrong password is still running:\n%s", p.out.String())
		}
		out := p.out.String()
		if p.err == nil {
			t.Fatalf("serve with a wrong password exited 0:\n%s", out)
		}
		expectLines(t, "the refusal", out, "refuses this executor", "401")
		if strings.Contains(out, password) || strings.Contains(out, "not-the-password") {
			t.Errorf("a password is in serve's output:\n%s", out)
		}
		if n := srv.Received("PUT", r.resource(t, "intent-0001")); n != 0 {
			t.Errorf("the refused executor sent %d PUTs", n)
		}
	})

	t.Run("a server down at start is waited for, and the message is created once it is back", func(t *testing.T) {
		srv.Stop()
		p := r.executor(t, srv.CollectionURL, "exec-patient", login(password)...)
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(p.out.String(), "does not answer yet") {
			select {
			case <-p.exited:
				t.Fatalf("serve exited while the server was down: %v\n%s", p.err, p.out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve said nothing of the server being down:\n%s", p.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		srv.Restart()
		rcs := awaitReceipts(t, r.env, []uint64{seq}, 60*time.Second)
		created := 0
		for _, rc := range rcs[seq] {
			if rc.Outcome == document.OutcomeCreated {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("want one created receipt for message %d, got %d of %d receipts\n%s", seq, created, len(rcs[seq]), p.out.String())
		}
		if n := srv.Creates(r.resource(t, "intent-0001")); n != 1 {
			t.Errorf("the server answered %d PUTs with 201, want 1", n)
		}
	})
}
