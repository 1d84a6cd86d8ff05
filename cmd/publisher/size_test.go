package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// publisher send stores the largest valid envelope, and refuses a stored
// envelope one byte over the bound, saying so, with nothing published.
func TestSendStoresTheLargestValidEnvelopeAndRefusesOneOverTheBound(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	largest, err := scenario.Largest()
	if err != nil {
		t.Fatal(err)
	}
	r := publisher(t, nil, "send", "--envelope", writeEnvelope(t, largest.Envelope()), "--server", env.URL())
	r.expect(t, exitOK)
	if !strings.Contains(r.stdout, "published: stream message 1") {
		t.Fatalf("the largest valid envelope was not published:\n%s", r.stdout)
	}
	over := largest.Envelope()
	over = append(over[:len(over)-1], bytes.Repeat([]byte(" "), document.MaxEnvelopeBytes-len(over)+1)...)
	over = append(over, '}')
	for _, flags := range [][]string{nil, {"--no-check"}} {
		r := publisher(t, nil, append([]string{"send", "--envelope", writeEnvelope(t, over), "--server", env.URL()}, flags...)...)
		r.expect(t, exitFailure)
		if want := "nothing published"; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "is over the limit of 86016") {
			t.Errorf("send %v of a %d-byte envelope: stderr lacks %q and the bound:\n%s", flags, len(over), want, r.stderr)
		}
	}
	if n := testenv.StreamState(t, env.JS, topology.ApprovalsStream).LastSeq; n != 1 {
		t.Errorf("APPROVALS holds %d messages, want the largest envelope alone", n)
	}
}
