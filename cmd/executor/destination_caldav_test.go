package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// The story, refused now: a reviewer approved the seed's fake task,
// and an executor pointed at a real calendar made a real one. The executor
// serving CalDAV calendars refuses every request that is not for one of
// them at the gate, and the server receives nothing for it; a CalDAV request
// for a served destination lands in that destination's calendar only.
func TestApprovalsAreCarriedOutOnlyInTheDestinationTheyNameOnACalDAVServer(t *testing.T) {
	r := startDAVRig(t, davtest.Radicale)
	teamPath := strings.TrimSuffix(r.srv.CollectionPath, "tasks/") + "team/"
	if code := r.srv.Do("MKCALENDAR", teamPath, nil); code != http.StatusCreated {
		t.Fatalf("MKCALENDAR %s answered %d", teamPath, code)
	}
	p := r.executor(t, r.srv.CollectionURL, "exec-dest", "--destination", "team="+r.srv.BaseURL+teamPath, "--log-level", "info")

	seed := testenv.Seed(t)
	elsewhere, err := scenario.CalDAV.At("ops").Generate(scenario.Candidate(), "ops", 1)
	if err != nil {
		t.Fatal(err)
	}
	resource := func(path, intent string) string {
		name, err := caldav.ResourceName(intent)
		if err != nil {
			t.Fatal(err)
		}
		return path + name
	}
	for _, c := range []struct {
		name   string
		msg    scenario.Approved
		intent string
		says   []string
	}{
		{"the seed's approval of a fake task is refused at destination", seed.Original, "intent-0001",
			[]string{`"fake-task-provider.v1"`, `"caldav-task.v1/default", "caldav-task.v1/team"`}},
		{"the seed's new intent is refused at destination", seed.NewIntent, "intent-0002", []string{`"fake-task-provider.v1"`}},
		{"a CalDAV approval for a calendar this executor does not serve is refused at destination", elsewhere, "intent-ops-000001",
			[]string{`destination "ops"`}},
	} {
		t.Run(c.name+", and the server receives nothing for it", func(t *testing.T) {
			rc := sendAndWait(t, r.env, c.msg.Envelope())
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckDestination {
				t.Fatalf("receipt %s %+v; want rejected at destination", rc.Outcome, rc.Rejection)
			}
			for _, s := range c.says {
				if !strings.Contains(rc.Rejection.Reason, s) {
					t.Errorf("the reason does not say %s: %s", s, rc.Rejection.Reason)
				}
			}
			for _, path := range []string{r.srv.CollectionPath, teamPath} {
				if n := r.srv.Received(http.MethodPut, resource(path, c.intent)); n != 0 {
					t.Errorf("the server received %d PUTs of %s", n, resource(path, c.intent))
				}
			}
		})
	}
	t.Run("after the refusals, the server has received no PUT and holds no task", func(t *testing.T) {
		for _, e := range r.srv.LogEntries() {
			if e.Received && e.Method == http.MethodPut {
				t.Errorf("the server received a PUT of %s", e.Path)
			}
		}
		if names := r.srv.StoredNames(); len(names) != 0 {
			t.Errorf("the default calendar holds %q", names)
		}
		if l := r.listing(t); len(l.Tasks) != 0 || l.VTODOs != 0 {
			t.Errorf("the default calendar lists %d tasks", l.VTODOs)
		}
	})

	for _, c := range []struct {
		name      string
		f         scenario.For
		prefix    string
		in, notIn string
	}{
		{"a CalDAV approval naming no destination is created in the default calendar only", scenario.CalDAV, "dflt", r.srv.CollectionPath, teamPath},
		{"a CalDAV approval for team is created in team's calendar only", scenario.CalDAV.At("team"), "team", teamPath, r.srv.CollectionPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := c.f.Generate(scenario.Candidate(), c.prefix, 1)
			if err != nil {
				t.Fatal(err)
			}
			rc := sendAndWait(t, r.env, a.Envelope())
			if rc.Outcome != document.OutcomeCreated {
				t.Fatalf("receipt %s %+v %+v; want created", rc.Outcome, rc.Rejection, rc.Failure)
			}
			intent := "intent-" + c.prefix + "-000001"
			if n := r.srv.Creates(resource(c.in, intent)); n != 1 {
				t.Errorf("the server answered %d PUTs of %s with 201; want 1", n, resource(c.in, intent))
			}
			if n := r.srv.Received(http.MethodPut, resource(c.notIn, intent)); n != 0 {
				t.Errorf("the server received %d PUTs of %s; want none", n, resource(c.notIn, intent))
			}
		})
	}
	t.Run("plain verify audits both recorded calendars, and every check holds", func(t *testing.T) {
		out, err := runCommand("verify", "--server", r.env.URL())
		if err != nil {
			t.Fatalf("verify: %v\n%s", err, out)
		}
		expectLines(t, "verify's report", out, r.srv.CollectionURL, r.srv.BaseURL+teamPath, "audited stores of other destinations")
	})
	t.Run("verify of the default calendar alone reports the team calendar's receipt as another store's", func(t *testing.T) {
		out, err := runCommand("verify", "--server", r.env.URL(), "--caldav-url", r.srv.CollectionURL)
		if err == nil {
			t.Fatalf("verify passed:\n%s", out)
		}
		if !strings.Contains(out, "receipts name store") {
			t.Errorf("verify's report does not name the other store:\n%s", out)
		}
	})
	t.Run("serve logs the destinations it serves", func(t *testing.T) {
		out := p.out.String()
		expectLines(t, "serve's log", out, "caldav-task.v1/default at "+r.srv.CollectionURL, "caldav-task.v1/team at "+r.srv.BaseURL+teamPath)
	})
}
