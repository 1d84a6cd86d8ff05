package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

func TestApproveSaysWhichProviderAndDestinationItApproved(t *testing.T) {
	dir := t.TempDir()
	seedRequest := readFile(t, seedFile("request.json"))
	caldavTeam := writeFile(t, dir, "caldav-team.json", scenario.Edit(seedRequest, func(m map[string]any) {
		m["provider"], m["destination"] = document.ProviderCalDAV, "team"
	}))
	redmine := writeFile(t, dir, "redmine.json", scenario.Edit(seedRequest, func(m map[string]any) { m["provider"] = document.ProviderRedmine }))
	for _, c := range []struct{ name, request, want string }{
		{"the seed request is approved for the fake service's default destination", seedFile("request.json"),
			"approved for provider fake-task-provider.v1, destination default (capability create_fake_task)"},
		{"a request for a CalDAV calendar named team is approved for it", caldavTeam,
			"approved for provider caldav-task.v1, destination team (capability create_caldav_task)"},
		{"a request for Redmine naming no destination is approved for its default", redmine,
			"approved for provider redmine-issue.v1, destination default (capability create_redmine_issue)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := publisher(t, nil, files{seedFile("candidate.json"), c.request, ""}.args("approve", "--by", "reviewer-1", "-o", filepath.Join(t.TempDir(), "a.json"))...)
			r.expect(t, 0)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
		})
	}
	t.Run("a request for an unknown provider is refused, naming the known ones", func(t *testing.T) {
		bad := writeFile(t, dir, "bad.json", scenario.Edit(seedRequest, func(m map[string]any) { m["provider"] = "caldav.v1" }))
		r := publisher(t, nil, files{seedFile("candidate.json"), bad, ""}.args("approve", "--by", "reviewer-1", "-o", filepath.Join(t.TempDir(), "a.json"))...)
		if r.code == 0 {
			t.Fatalf("approve accepted an unknown provider:\n%s", r.stderr)
		}
		for _, want := range []string{`unknown provider "caldav.v1"`, document.ProviderCalDAV} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})
}
