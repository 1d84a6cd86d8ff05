package caldav_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// Each refusal the adapter can explain is its own permanent error, marked
// as having created nothing, with the true reason in its text; each is
// made on the real servers as a person's calendar client would make it.
func TestARefusedCreateSaysItsTrueReason(t *testing.T) {
	marks := regexp.MustCompile(`(?m)^X-SENDTWICE-[^\r\n]*\r?\n( [^\r\n]*\r?\n)*`)
	cases := []struct {
		name    string
		prepare func(t *testing.T, s *davtest.Server, a *caldav.Adapter, req taskservice.Request)
		is      error
		says    []string
	}{
		{"a resource under another name holding the task's UID is a UID clash",
			func(t *testing.T, s *davtest.Server, a *caldav.Adapter, req taskservice.Request) {
				if code := s.Put(s.ResourcePath("copied-by-a-client.ics"), vtodo(caldav.TaskID(req.KeyScope(), req.IntentID), "a copy")); code != http.StatusCreated {
					t.Fatalf("the copy's PUT answered %d", code)
				}
			},
			caldav.ErrUIDClash, []string{"no-uid-conflict", "another name", `"intent-reasons"`}},
		{"a resource not made by the adapter at the intent's name is not ours",
			func(t *testing.T, s *davtest.Server, a *caldav.Adapter, req taskservice.Request) {
				_, path := resourcePath(t, s, req.IntentID)
				if code := s.Put(path, vtodo("someone-elses-task", "theirs")); code != http.StatusCreated {
					t.Fatalf("the foreign PUT answered %d", code)
				}
			},
			caldav.ErrNotOurs, []string{"someone-elses-task", "no X-SENDTWICE-REQUEST-DIGEST property"}},
		{"our task whose X-SENDTWICE properties a client dropped has lost its marks",
			func(t *testing.T, s *davtest.Server, a *caldav.Adapter, req taskservice.Request) {
				if res := create(t, a, req); res.Outcome != taskservice.Created {
					t.Fatalf("the first create: %+v", res)
				}
				name, path := resourcePath(t, s, req.IntentID)
				stripped := marks.ReplaceAll(s.Stored(name), nil)
				if strings.Contains(string(stripped), "X-SENDTWICE") {
					t.Fatalf("the marks are still there:\n%s", stripped)
				}
				if code := s.Put(path, stripped); code != http.StatusNoContent && code != http.StatusCreated && code != http.StatusOK {
					t.Fatalf("the rewrite's PUT answered %d", code)
				}
			},
			caldav.ErrMarksRemoved, []string{`this intent's UID "intent-reasons"`, "dropped the marks", "cannot be told"}},
	}
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			t.Parallel()
			davtest.Require(t, k)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					s, a := serverAndAdapter(t, k)
					req := request("intent-reasons", "the real one")
					c.prepare(t, s, a, req)
					before := s.StoredNames()
					_, err := a.Create(context.Background(), req)
					t.Logf("error: %v", err)
					if !errors.Is(err, c.is) || !taskservice.IsPermanent(err) || !taskservice.IsNotCreated(err) {
						t.Fatalf("Create: %v; want a permanent error wrapping %q, marked as having created nothing", err, c.is)
					}
					for _, w := range c.says {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("the error does not say %q", w)
						}
					}
					if strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "different content") {
						t.Errorf("the error gives a wrong reason: %v", err)
					}
					// A lookup (as the intent ledger makes before a resend)
					// gives the same reason, except for the UID clash, whose
					// name holds nothing.
					if _, found, ferr := a.Find(context.Background(), req); !errors.Is(c.is, caldav.ErrUIDClash) && (found || !errors.Is(ferr, c.is)) {
						t.Errorf("Find: found %v, %v; want the same reason", found, ferr)
					}
					if after := s.StoredNames(); strings.Join(after, " ") != strings.Join(before, " ") {
						t.Errorf("the collection changed: %q, then %q", before, after)
					}
				})
			}
		})
	}
}

// The ordinary answers keep their outcomes: a changed request at our own
// resource is a conflict, not one of the refusals above.
func TestAChangedRequestIsStillAConflictNotARefusal(t *testing.T) {
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			_, a := serverAndAdapter(t, k)
			first := create(t, a, request("intent-ordinary", "first"))
			again := create(t, a, request("intent-ordinary", "first"))
			changed := create(t, a, request("intent-ordinary", "changed"))
			if first.Outcome != taskservice.Created || again.Outcome != taskservice.Replayed || changed.Outcome != taskservice.Conflict || changed.TaskID != first.TaskID {
				t.Errorf("outcomes %s, %s, %s (task %s, %s); want created, replayed, conflict with the first task", first.Outcome, again.Outcome, changed.Outcome, first.TaskID, changed.TaskID)
			}
		})
	}
}
