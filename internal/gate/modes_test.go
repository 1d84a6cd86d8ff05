package gate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/gate"
)

// A nil *Checker selects nothing: each of its methods refuses with
// ErrNoChecker instead of falling back to the checks that need no keys,
// which run only when called by name.
func TestANilCheckerRunsNoCheckAndSaysSo(t *testing.T) {
	s := seed(t)
	env := s.Original.Envelope()
	a := s.Original
	var c *gate.Checker
	for _, tc := range []struct {
		name string
		run  func() (*gate.Verdict, error)
	}{
		{"Check", func() (*gate.Verdict, error) { return c.Check(env) }},
		{"CheckAt", func() (*gate.Verdict, error) { return c.CheckAt(env, time.Now()) }},
		{"CheckDelivery", func() (*gate.Verdict, error) { return c.CheckDelivery("", env, time.Now()) }},
		{"CheckDocuments", func() (*gate.Verdict, error) { return c.CheckDocuments(a.Candidate, a.Request, a.Approval) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.run()
			if v != nil || !errors.Is(err, gate.ErrNoChecker) {
				t.Fatalf("got %v, %v; want no verdict and ErrNoChecker", v, err)
			}
		})
	}
	if _, err := gate.CheckBindings(env); err != nil {
		t.Fatalf("the same envelope, by CheckBindings: %v", err)
	}
	if _, err := gate.CheckDocumentBindings(a.Candidate, a.Request, a.Approval); err != nil {
		t.Fatalf("the same documents, by CheckDocumentBindings: %v", err)
	}
}
