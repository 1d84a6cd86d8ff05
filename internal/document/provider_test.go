package document_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
)

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
