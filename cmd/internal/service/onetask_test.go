package service

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
)

// The task service serve composes for several CalDAV calendars keeps a key
// to one task across them: a task of the key that the intent ledger does
// not know (its entry expired, or its create's reply was lost) is found in
// the other calendar, and a request for the key in team is answered
// idempotency_conflict without a PUT. With one calendar, nothing is added.
func TestServesCalDAVServiceKeepsAKeyToOneTaskAcrossItsCalendars(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{})
	teamPath := strings.TrimSuffix(srv.CollectionPath, "tasks/") + "team/"
	srv.MakeCalendar(teamPath, "team", "VTODO")
	for _, c := range []struct {
		name      string
		args      []string
		conflicts bool
	}{
		{"with two calendars, the key's task in default refuses a create in team", []string{"--destination", "team=" + srv.BaseURL + teamPath}, true},
		{"with one calendar, the service is composed with the ledger alone", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := openCalDAVFlags(t, append([]string{"--task-service", "caldav", "--caldav-url", srv.CollectionURL}, c.args...)...)
			intent := "intent-wired-" + map[bool]string{true: "two", false: "one"}[c.conflicts]
			if (svc.oneTaskPerKey != nil) != c.conflicts {
				t.Fatalf("open composed one task per key: %v; want %v", svc.oneTaskPerKey != nil, c.conflicts)
			}
			if !c.conflicts {
				what, err := svc.KeepDeletedKeys(context.Background(), testenv.JetStream(t), true, 1)
				if err != nil || strings.Contains(what, "locks") {
					t.Errorf("KeepDeletedKeys: %q, %v; want the ledger without locks", what, err)
				}
				return
			}
			// A task of the key in default that the ledger never learned.
			if res, err := svc.Service.Create(context.Background(), caldavCall(intent, document.DefaultDestination)); err != nil || res.Outcome != taskservice.Created {
				t.Fatalf("the create in default answered %+v, %v", res, err)
			}
			what, err := svc.KeepDeletedKeys(context.Background(), testenv.JetStream(t), true, 1)
			if err != nil {
				t.Fatalf("KeepDeletedKeys: %v", err)
			}
			if !strings.Contains(what, "per-key locks across destinations") {
				t.Errorf("KeepDeletedKeys says the ledger is %q; want it to name its locks", what)
			}
			// A request's digest covers its destination, so team's differs;
			// one with default's digest would be a replay of its task.
			team := caldavCall(intent, "team")
			team.RequestDigest = "sha256:" + strings.Repeat("cd", 32)
			res, err := svc.Service.Create(context.Background(), team)
			if err != nil || res.Outcome != taskservice.Conflict || !strings.Contains(res.Reason, "caldav-task.v1/default") {
				t.Errorf("the create in team answered %+v, %v; want idempotency_conflict naming default", res, err)
			}
			res, err = svc.Service.Create(context.Background(), caldavCall(intent, "team"))
			if err != nil || res.Outcome != taskservice.Replayed || res.TaskID != intent {
				t.Errorf("the create in team with default's digest answered %+v, %v; want replayed, default's task", res, err)
			}
			if n := srv.Received(http.MethodPut, teamPath+intent+".ics"); n != 0 {
				t.Errorf("team's calendar received %d PUTs of the intent; want none", n)
			}
		})
	}
}
