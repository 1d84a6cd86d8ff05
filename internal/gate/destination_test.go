package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// approvedFor is the seed's original request for f, approved (unsigned).
func approvedFor(t *testing.T, f scenario.For) scenario.Approved {
	t.Helper()
	s, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s.Original
}

// withCapabilities is a's approval granting caps instead (unsigned: an
// insecure checker takes it as a reviewer's decision).
func withCapabilities(a scenario.Approved, caps ...string) scenario.Approved {
	a.Approval = scenario.Edit(a.Approval, func(m map[string]any) { m["capabilities"] = caps })
	return a
}

var (
	caldavDefault  = gate.Destination{Provider: document.ProviderCalDAV, Name: "default"}
	caldavTeam     = gate.Destination{Provider: document.ProviderCalDAV, Name: "team"}
	fakeDefault    = gate.Destination{Provider: document.ProviderFake, Name: "default"}
	redmineDefault = gate.Destination{Provider: document.ProviderRedmine, Name: "default"}
)

func TestTheApprovalGrantsExactlyTheCapabilityOfItsRequestsProvider(t *testing.T) {
	for _, c := range []struct {
		name  string
		msg   scenario.Approved
		check string // "" passes
		says  string
	}{
		{"a fake request approved for create_fake_task passes", approvedFor(t, scenario.Fake), "", ""},
		{"a CalDAV request approved for create_caldav_task passes", approvedFor(t, scenario.CalDAV), "", ""},
		{"a Redmine request approved for create_redmine_issue passes", approvedFor(t, scenario.Redmine), "", ""},
		{"a CalDAV request approved for create_fake_task is refused at capability",
			withCapabilities(approvedFor(t, scenario.CalDAV), document.CapabilityCreateFakeTask), gate.CheckCapability, `["create_caldav_task"]`},
		{"a fake request approved for create_caldav_task is refused at capability",
			withCapabilities(approvedFor(t, scenario.Fake), document.CapabilityCreateCalDAVTask), gate.CheckCapability, `["create_fake_task"]`},
		{"a Redmine request approved for create_caldav_task is refused at capability",
			withCapabilities(approvedFor(t, scenario.Redmine), document.CapabilityCreateCalDAVTask), gate.CheckCapability, `["create_redmine_issue"]`},
		{"a CalDAV request approved for both CalDAV and fake tasks is refused at capability",
			withCapabilities(approvedFor(t, scenario.CalDAV), document.CapabilityCreateCalDAVTask, document.CapabilityCreateFakeTask), gate.CheckCapability, `"caldav-task.v1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gate.CheckBindings(c.msg.Envelope())
			expectCheck(t, err, c.check, c.says)
		})
	}
}

func TestTheDestinationCheckRefusesWhatTheExecutorDoesNotServe(t *testing.T) {
	for _, c := range []struct {
		name   string
		serves []gate.Destination
		msg    scenario.Approved
		check  string // "" passes
		path   string
		says   []string
	}{
		{"a CalDAV request naming no destination passes an executor serving CalDAV's default",
			[]gate.Destination{caldavDefault}, approvedFor(t, scenario.CalDAV), "", "", nil},
		{"a CalDAV request for team passes an executor serving CalDAV's default and team",
			[]gate.Destination{caldavDefault, caldavTeam}, approvedFor(t, scenario.CalDAV.At("team")), "", "", nil},
		{"a CalDAV request naming default passes as one naming none",
			[]gate.Destination{caldavDefault}, approvedFor(t, scenario.CalDAV.At("default")), "", "", nil},
		{"a seed (fake) request is refused by an executor serving a CalDAV calendar",
			[]gate.Destination{caldavDefault}, approvedFor(t, scenario.Fake), gate.CheckDestination, "$.request.provider",
			[]string{`"fake-task-provider.v1"`, `"caldav-task.v1/default"`, "nothing was sent"}},
		{"a CalDAV request for team is refused by an executor serving CalDAV's default only",
			[]gate.Destination{caldavDefault}, approvedFor(t, scenario.CalDAV.At("team")), gate.CheckDestination, "$.request.destination",
			[]string{`destination "team"`, `"caldav-task.v1/default"`}},
		{"a CalDAV request naming no destination is refused by an executor serving only team",
			[]gate.Destination{caldavTeam}, approvedFor(t, scenario.CalDAV), gate.CheckDestination, "$.request.destination",
			[]string{`destination "default"`, `"caldav-task.v1/team"`}},
		{"a CalDAV request is refused by an executor serving Redmine",
			[]gate.Destination{redmineDefault}, approvedFor(t, scenario.CalDAV), gate.CheckDestination, "$.request.provider",
			[]string{`"redmine-issue.v1/default"`}},
		{"a seed request passes an executor serving the fake service's default",
			[]gate.Destination{fakeDefault}, approvedFor(t, scenario.Fake), "", "", nil},
		{"an executor serving nothing refuses every request",
			[]gate.Destination{}, approvedFor(t, scenario.Fake), gate.CheckDestination, "$.request.provider", []string{"serves only nothing"}},
		{"a checker that names no served set (a local check) lets a CalDAV request through",
			nil, approvedFor(t, scenario.CalDAV.At("team")), "", "", nil},
		{"capability is checked before destination",
			[]gate.Destination{caldavDefault}, withCapabilities(approvedFor(t, scenario.Fake), "publish"), gate.CheckCapability, "$.approval.capabilities", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			checker := &gate.Checker{AllowUnsigned: true, Serves: c.serves}
			_, err := checker.Check(c.msg.Envelope())
			expectCheck(t, err, c.check, c.says...)
			var ge *gate.Error
			if errors.As(err, &ge) && c.path != "" && ge.Path != c.path {
				t.Errorf("refused at path %s; want %s", ge.Path, c.path)
			}
			if c.check == gate.CheckDestination && !errors.Is(err, gate.ErrDestination) {
				t.Errorf("the refusal %v does not wrap gate.ErrDestination", err)
			}
		})
	}
	t.Run("the checks that need no executor do not check the destination", func(t *testing.T) {
		if _, err := gate.CheckBindings(approvedFor(t, scenario.CalDAV.At("elsewhere")).Envelope()); err != nil {
			t.Errorf("CheckBindings refused: %v", err)
		}
	})
}

func expectCheck(t *testing.T, err error, check string, says ...string) {
	t.Helper()
	if check == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var ge *gate.Error
	if !errors.As(err, &ge) {
		t.Fatalf("got %v; want a refusal at %s", err, check)
	}
	if ge.Check != check {
		t.Fatalf("refused at %s (%v); want %s", ge.Check, err, check)
	}
	for _, s := range says {
		if !strings.Contains(ge.Reason, s) {
			t.Errorf("the reason does not say %s: %s", s, ge.Reason)
		}
	}
}

func TestARequestForAnUnknownProviderIsRefusedAtEnvelopeNamingTheKnownOnes(t *testing.T) {
	a := approvedFor(t, scenario.Fake)
	a.Request = scenario.Edit(a.Request, func(m map[string]any) { m["provider"] = "caldav.v1" })
	_, err := (&gate.Checker{AllowUnsigned: true, Serves: []gate.Destination{caldavDefault}}).Check(a.Envelope())
	expectCheck(t, err, gate.CheckEnvelope, `unknown provider "caldav.v1"`, document.ProviderCalDAV, document.ProviderRedmine)
	var ge *gate.Error
	if errors.As(err, &ge) && ge.Path != "$.request.provider" {
		t.Errorf("refused at %s; want $.request.provider", ge.Path)
	}
}
