package document_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

func candidateWithStartMS(t *testing.T, literal string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "seed", "candidate.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Replace(data, []byte(`"start_ms": 812000`), []byte(`"start_ms": `+literal), 1)
	if bytes.Equal(out, data) {
		t.Fatal("the seed candidate has no start_ms of 812000")
	}
	return out
}

func decodeCandidate(data []byte) error {
	v, err := document.Parse(data)
	if err != nil {
		return err
	}
	_, err = document.DecodeCandidate("$", v)
	return err
}

func TestAnIntegerFieldRefusesNumbersThatADoubleCannotHoldExactly(t *testing.T) {
	for literal, want := range map[string]error{
		"9007199254740993":   canon.ErrNumberInexact,
		"9007199254740992.4": canon.ErrNumberInexact,
		"9007199254740992":   document.ErrValue,
		"9007199254740994":   document.ErrValue,
	} {
		err := decodeCandidate(candidateWithStartMS(t, literal))
		if !errors.Is(err, want) {
			t.Errorf("start_ms %s: got %v, want %v", literal, err, want)
		}
	}
	for _, literal := range []string{"812000.0", "8.12e5", "0.0"} {
		if err := decodeCandidate(candidateWithStartMS(t, literal)); err != nil {
			t.Errorf("start_ms %s: %v", literal, err)
		}
	}
}

func TestIdentifyReadsTheScopeOnlyWhenItIsAScope(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	with := func(scope any) []byte {
		req := scenario.Edit(s.Original.Request, func(m map[string]any) { m["scope"] = scope })
		env, err := document.BuildEnvelope(s.Original.Candidate, req, s.Original.Approval)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	for _, tc := range []struct {
		name     string
		envelope []byte
		want     string
	}{
		{"a request without a scope names none (the default scope)", s.Original.Envelope(), ""},
		{"a request with a scope names it", with("team-a"), "team-a"},
		{"a scope with a dot is not a scope", with("team-a.team-b"), ""},
		{"a wildcard is not a scope", with("*"), ""},
		{"a scope that is not a string is not a scope", with(7), ""},
		{"a message that is not an envelope names none", []byte(`{"scope":"team-a"}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := document.Identify(tc.envelope)
			if id.Scope != tc.want {
				t.Fatalf("scope %q, want %q", id.Scope, tc.want)
			}
		})
	}
}

func TestCapabilityOf(t *testing.T) {
	for _, tc := range []struct {
		name, provider, want string
		known                bool
	}{
		{"the fake provider's approval grants create_fake_task", document.ProviderFake, document.CapabilityCreateFakeTask, true},
		{"the CalDAV provider's approval grants create_caldav_task", document.ProviderCalDAV, document.CapabilityCreateCalDAVTask, true},
		{"the Redmine provider's approval grants create_redmine_issue", document.ProviderRedmine, document.CapabilityCreateRedmineIssue, true},
		{"an unknown provider has no capability", "real-task-provider.v1", "", false},
		{"an empty provider has no capability", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := document.CapabilityOf(tc.provider)
			if got != tc.want || known != tc.known {
				t.Errorf("CapabilityOf(%q) = %q, %v; want %q, %v", tc.provider, got, known, tc.want, tc.known)
			}
		})
	}
}

func TestDestinationName(t *testing.T) {
	for _, tc := range []struct{ name, destination, want string }{
		{"a request that names no destination is for default", "", "default"},
		{"a request that names one is for it", "team", "team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := document.Request{Destination: tc.destination}
			if got := q.DestinationName(); got != tc.want {
				t.Errorf("DestinationName() = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestUnknownProviderReasonNamesTheKnownOnes(t *testing.T) {
	v, err := document.Parse(mutatedRequest(t, "provider", "caldav.v1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = document.DecodeRequest("$", v)
	var de *document.Error
	if !errors.As(err, &de) || de.Path != "$.provider" {
		t.Fatalf("DecodeRequest: %v; want a refusal at $.provider", err)
	}
	for _, want := range []string{`unknown provider "caldav.v1"`, document.ProviderFake, document.ProviderCalDAV, document.ProviderRedmine} {
		if !strings.Contains(de.Reason, want) {
			t.Errorf("reason %q does not say %q", de.Reason, want)
		}
	}
}

func TestRequestDecodesProviderAndDestination(t *testing.T) {
	data := mutatedRequest(t, "provider", document.ProviderCalDAV)
	data = []byte(strings.Replace(string(data), `"provider"`, `"destination": "team", "provider"`, 1))
	v, err := document.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	q, err := document.DecodeRequest("$", v)
	if err != nil {
		t.Fatal(err)
	}
	if q.Provider != document.ProviderCalDAV || q.Destination != "team" || q.DestinationName() != "team" {
		t.Errorf("decoded provider %q, destination %q; want %q, %q", q.Provider, q.Destination, document.ProviderCalDAV, "team")
	}
}

// mutatedRequest is the seed request with one top-level string member set.
func mutatedRequest(t *testing.T, member, value string) []byte {
	t.Helper()
	return mutated(t, "seed/request.json", set(member, value))
}

func TestEndsOnlyATerminalReceiptEndsTheMessageItNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		named   uint64
		outcome string
		ends    bool
	}{
		{"created", 7, document.OutcomeCreated, true},
		{"replayed", 7, document.OutcomeReplayed, true},
		{"an idempotency conflict", 7, document.OutcomeConflict, true},
		{"rejected", 7, document.OutcomeRejected, true},
		{"dead-lettered", 7, document.OutcomeDeadLettered, true},
		{"an outcome nobody defines", 7, "pending", false},
		{"no outcome", 7, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, ok := document.Ends(tc.named, tc.outcome)
			if ok != tc.ends || (ok && seq != tc.named) {
				t.Fatalf("Ends(%d, %q) = %d, %v; want %d, %v", tc.named, tc.outcome, seq, ok, tc.named, tc.ends)
			}
			r := &document.Receipt{Outcome: tc.outcome, Delivery: document.Delivery{StreamSeq: tc.named}}
			if got := r.Of(tc.named); got != tc.ends {
				t.Errorf("a receipt %q naming message %d: Of(%d) = %v, want %v", tc.outcome, tc.named, tc.named, got, tc.ends)
			}
			if r.Of(tc.named + 1) {
				t.Errorf("a receipt %q naming message %d is the receipt of message %d", tc.outcome, tc.named, tc.named+1)
			}
		})
	}
}
