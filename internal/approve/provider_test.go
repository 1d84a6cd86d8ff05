package approve_test

import (
	"slices"
	"testing"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

func TestTheApprovalGrantsTheCapabilityOfTheRequestsProvider(t *testing.T) {
	for _, c := range []struct {
		name string
		f    scenario.For
		want string
	}{
		{"a request for the fake task service is approved for create_fake_task", scenario.Fake, document.CapabilityCreateFakeTask},
		{"a request for a CalDAV calendar is approved for create_caldav_task", scenario.CalDAV.At("team"), document.CapabilityCreateCalDAVTask},
		{"a request for a Redmine project is approved for create_redmine_issue", scenario.Redmine, document.CapabilityCreateRedmineIssue},
	} {
		t.Run(c.name, func(t *testing.T) {
			cand := scenario.Candidate()
			req, err := c.f.Request(cand, "task-request-1", "intent-1", scenario.Title)
			if err != nil {
				t.Fatal(err)
			}
			a, err := approve.Approve(cand, req, approve.Options{By: scenario.Reviewer})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Capabilities, []string{c.want}) {
				t.Errorf("capabilities %q; want [%q]", a.Capabilities, c.want)
			}
		})
	}
}
