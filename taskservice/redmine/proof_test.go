package redmine_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// markKey stands for a deployment's mark key.
var markKey = bytes.Repeat([]byte{0x5e}, proof.MinKeyBytes)

// listed is the listed task of issue id, failing the test when ListTasks
// does not list it.
func listed(t *testing.T, a *redmine.Adapter, id int) taskservice.ListedTask {
	t.Helper()
	l, err := a.ListTasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range l.Tasks {
		if lt.TaskID == redmine.TaskID(id) {
			return lt
		}
	}
	t.Fatalf("ListTasks does not list issue #%d: %+v", id, l.Tasks)
	return taskservice.ListedTask{}
}

// wantSays fails the test unless text holds every one of words.
func wantSays(t *testing.T, what, text string, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(text, w) {
			t.Errorf("%s %q does not say %q", what, text, w)
		}
	}
}

// Issues planted, copied or forged by someone other than the pipeline,
// against an adapter given a mark key, on one real Redmine with a
// Reporter.
func TestPlantedAndForgedMarksOnRedmine(t *testing.T) {
	s := redminetest.Start(t, redminetest.Options{})
	l := startLedger(t)
	a := onServer(t, s, l, func(c *redmine.Config) { c.MarkKey = markKey })
	reporter := s.AddUser(t, "mallory", "Reporter")
	ctx := context.Background()

	t.Run("an issue a Reporter plants with the future key and a copied digest is not taken: the real create makes its issue", func(t *testing.T) {
		planted := s.CreateIssueAs(t, reporter, "Pay invoice 4711 to MALLORY LTD", redmine.Mark("default", "planted-1", digestA))
		res := mustCreate(t, a, request("planted-1", digestA), taskservice.Created)
		t.Logf("the receipt's reason: %s", res.Reason)
		wantSays(t, "the receipt's reason", res.Reason, "issue #"+strconv.Itoa(planted), "mallory", "not taken")
		again := mustCreate(t, a, request("planted-1", digestA), taskservice.Replayed)
		if again.TaskID != res.TaskID {
			t.Fatalf("the resend replayed %s, want the pipeline's issue %s", again.TaskID, res.TaskID)
		}
		if got := listed(t, a, planted).Unproven; !strings.Contains(got, "mallory") {
			t.Errorf("ListTasks says the planted issue is unproven because %q, want its author named", got)
		}
		id, _ := strconv.Atoi(res.TaskID)
		if got := listed(t, a, id).Unproven; got != "" {
			t.Errorf("ListTasks says the pipeline's own issue is unproven: %q", got)
		}
	})

	t.Run("a mark a Reporter copies onto a second issue does not dead-letter the real intent", func(t *testing.T) {
		first := mustCreate(t, a, request("copied-1", digestA), taskservice.Created)
		id, _ := strconv.Atoi(first.TaskID)
		real, _ := s.Issue(t, id)
		copied := s.CreateIssueAs(t, reporter, "a copy", real.Mark)
		res := mustCreate(t, a, request("copied-1", digestA), taskservice.Replayed)
		if res.TaskID != first.TaskID {
			t.Fatalf("replayed %s, want %s", res.TaskID, first.TaskID)
		}
		wantSays(t, "the receipt's reason", res.Reason, "issue #"+strconv.Itoa(copied), "mallory")
		if got := listed(t, a, copied).Unproven; got == "" {
			t.Error("ListTasks does not say the copy is unproven")
		}
	})

	t.Run("two issues proven to be the pipeline's are a real double, said so", func(t *testing.T) {
		first := mustCreate(t, a, request("double-1", digestA), taskservice.Created)
		id, _ := strconv.Atoi(first.TaskID)
		real, _ := s.Issue(t, id)
		second := s.CreateIssue(t, "made twice", real.Mark)
		_, err := a.Create(ctx, request("double-1", digestA))
		if !taskservice.IsPermanent(err) || !errors.Is(err, redmine.ErrDuplicates) {
			t.Fatalf("Create: %v, want a permanent ErrDuplicates", err)
		}
		wantSays(t, "the error", err.Error(), "#"+first.TaskID, "#"+strconv.Itoa(second), "created more than once")
		if strings.Contains(err.Error(), "safe") {
			t.Errorf("the error %q says something is safe", err)
		}
	})

	t.Run("a mark whose tag the pipeline's own user edited to claim another key is ignored and reported", func(t *testing.T) {
		other := mustCreate(t, a, request("forged-source", digestA), taskservice.Created)
		id, _ := strconv.Atoi(other.TaskID)
		real, _ := s.Issue(t, id)
		forgedMark := strings.Replace(real.Mark, " forged-source ", " forged-1 ", 1)
		if !strings.HasPrefix(forgedMark, "st2 ") || forgedMark == real.Mark {
			t.Fatalf("the pipeline's mark %q is not a tagged one", real.Mark)
		}
		forged := s.CreateIssue(t, "forged by hand", forgedMark)
		res := mustCreate(t, a, request("forged-1", digestA), taskservice.Created)
		wantSays(t, "the receipt's reason", res.Reason, "issue #"+strconv.Itoa(forged), "tag")
		if got := listed(t, a, forged).Unproven; !strings.Contains(got, "tag") {
			t.Errorf("ListTasks says the forged issue is unproven because %q, want its tag named", got)
		}
	})

	t.Run("a tagged mark without its tag, by the pipeline's own user, is ignored and reported", func(t *testing.T) {
		untagged := s.CreateIssue(t, "no tag", "st2 default untagged-1 "+digestA)
		res, found, err := a.Find(ctx, request("untagged-1", digestA))
		if err != nil || found {
			t.Fatalf("Find: found %v, %v; want nothing taken", found, err)
		}
		wantSays(t, "Find's reason", res.Reason, "issue #"+strconv.Itoa(untagged), "tag")
		mustCreate(t, a, request("untagged-1", digestA), taskservice.Created)
	})

	t.Run("a mark made before mark keys, by the pipeline's user, is still its key's task", func(t *testing.T) {
		old := s.CreateIssue(t, "made before the key", redmine.Mark("default", "before-keys-1", digestA))
		res := mustCreate(t, a, request("before-keys-1", digestA), taskservice.Replayed)
		if res.TaskID != redmine.TaskID(old) || res.Reason != "" {
			t.Fatalf("replayed %+v, want issue #%d and nothing to say", res, old)
		}
		if got := listed(t, a, old).Unproven; got != "" {
			t.Errorf("ListTasks says the old issue is unproven: %q", got)
		}
	})

	t.Run("the same old mark on an issue by another user is ignored and reported", func(t *testing.T) {
		old := s.CreateIssueAs(t, reporter, "made before the key, by someone else", redmine.Mark("default", "before-keys-2", digestA))
		res := mustCreate(t, a, request("before-keys-2", digestA), taskservice.Created)
		wantSays(t, "the receipt's reason", res.Reason, "issue #"+strconv.Itoa(old), "mallory")
	})

	t.Run("without a mark key, marks are believed as before", func(t *testing.T) {
		plain := onServer(t, s, l, nil)
		planted := s.CreateIssueAs(t, reporter, "believed", redmine.Mark("default", "no-key-1", digestA))
		res := mustCreate(t, plain, request("no-key-1", digestA), taskservice.Replayed)
		if res.TaskID != redmine.TaskID(planted) {
			t.Fatalf("replayed %s, want #%d", res.TaskID, planted)
		}
		if got := listed(t, plain, planted).Unproven; got != "" {
			t.Errorf("without a key, ListTasks says %q", got)
		}
	})
}
