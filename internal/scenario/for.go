package scenario

import "github.com/sendtwice/sendtwice/internal/document"

// For names the task service a scenario's requests are for: a provider
// (document.ProviderFake when empty) and a destination (none named, the
// default one, when empty). Its methods make the scenario's documents for
// it, approved with the provider's capability, so that a test against a
// CalDAV or Redmine executor sends what a reviewer would approve for that
// service. The package's functions are those of For{}: the fake task
// service's default destination, as the seed fixtures are.
type For struct {
	Provider    string
	Destination string
	// Scope is the caller scope the requests name; "" names none (the
	// default scope).
	Scope string
}

// Common targets of a scenario.
var (
	Fake    = For{Provider: document.ProviderFake}
	CalDAV  = For{Provider: document.ProviderCalDAV}
	Redmine = For{Provider: document.ProviderRedmine}
)

// At is f for the named destination.
func (f For) At(destination string) For { f.Destination = destination; return f }

// InScope is f for requests that name the caller scope scope.
func (f For) InScope(scope string) For { f.Scope = scope; return f }

func (f For) provider() string {
	if f.Provider == "" {
		return document.ProviderFake
	}
	return f.Provider
}

// capability is what an approval of f's requests grants.
func (f For) capability() string {
	c, _ := document.CapabilityOf(f.provider())
	return c
}

// DestinationFiles returns the fixtures of requests for the other
// providers, by path under testdata/: the seed's original request for a
// CalDAV calendar named team and for Redmine's default destination, each
// approved (unsigned) with its provider's capability, with its envelope.
func DestinationFiles() (map[string][]byte, error) {
	f := map[string][]byte{}
	for _, t := range []struct {
		name string
		f    For
	}{
		{"caldav-team", CalDAV.At("team")},
		{"redmine", Redmine},
	} {
		s, err := t.f.Build()
		if err != nil {
			return nil, err
		}
		f["destination/request-"+t.name+".json"] = s.Original.Request
		f["destination/approval-"+t.name+".json"] = s.Original.Approval
		f["destination/envelope-"+t.name+".json"] = indent(s.Original.Envelope())
	}
	return f, nil
}
