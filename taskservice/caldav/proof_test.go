package caldav_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
)

// markKey is the deployment's mark key of these tests.
var markKey = bytes.Repeat([]byte("mark key of the deployment, 32b!"), 1)

// keyed starts a server of kind k and an adapter with the mark key on its
// collection.
func keyed(t *testing.T, k davtest.Kind) (*davtest.Server, *caldav.Adapter) {
	t.Helper()
	s := davtest.Start(t, k, davtest.Options{})
	return s, adapter(t, s.CollectionURL, caldav.Config{MarkKey: markKey})
}

// scoped is request(intent, title) in scope.
func scoped(scope, intent, title string) taskservice.Request {
	req := request(intent, title)
	req.Scope = scope
	return req
}

// planted is a calendar another client writes: one VTODO with uid and
// title that claims (scope, intent) with digest, as the adapter marks its
// own, with more property lines after them.
func planted(uid, scope, intent, digest, title string, more ...string) []byte {
	lines := append([]string{"BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//another client//EN", "BEGIN:VTODO",
		"UID:" + uid, "DTSTAMP:20260101T000000Z", "SUMMARY:" + title,
		caldav.PropIntentID + ":" + intent, caldav.PropScope + ":" + scope, caldav.PropRequestDigest + ":" + digest},
		more...)
	return []byte(strings.Join(append(lines, "END:VTODO", "END:VCALENDAR", ""), "\r\n"))
}

// nameOf is the name a's task of req has.
func nameOf(t *testing.T, a *caldav.Adapter, req taskservice.Request) string {
	t.Helper()
	name, err := a.ResourceNameOf(req.KeyScope(), req.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// untaggedName is the name of req's key before mark keys.
func untaggedName(t *testing.T, req taskservice.Request) string {
	t.Helper()
	name, err := caldav.ScopedResourceName(req.KeyScope(), req.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// proofLine is the proof's line of a stored resource: its tag, and its
// line end.
var proofLine = regexp.MustCompile(`(?m)^` + caldav.PropProof + `:([0-9a-f]*)(\r?\n)`)

// onEachServer runs test on each server kind, in parallel.
func onEachServer(t *testing.T, test func(t *testing.T, k davtest.Kind)) {
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			t.Parallel()
			test(t, k)
		})
	}
}

// The attack of issue 34: a second user of the calendar PUTs the future
// task's resource before the approval runs, with the X-SENDTWICE
// properties and the approved digest copied, and another summary; the
// real approval came back replayed, the planted task the only one. With a
// mark key the task's name cannot be guessed: the planted resources, at
// the name of before mark keys (the approved digest) and at a name made
// like an earlier task's (a made-up digest, which ended the approval in
// idempotency_conflict), are left as they are, listed as unproven, and the
// real task is created.
func TestACalendarUserWhoPlantsTheFutureTaskGetsNothing(t *testing.T) {
	onEachServer(t, func(t *testing.T, k davtest.Kind) {
		s, a := keyed(t, k)
		ctx := context.Background()
		earlier := scoped("tenant-a", "c-intent-2", "Pay invoice 4710 to ACME")
		create(t, a, earlier)
		earlierTag := proofLine.FindSubmatch(s.Stored(nameOf(t, a, earlier)))
		if earlierTag == nil {
			t.Fatalf("the earlier task carries no %s:\n%s", caldav.PropProof, s.Stored(nameOf(t, a, earlier)))
		}
		copied := caldav.PropProof + ":" + string(earlierTag[1])

		req := scoped("tenant-a", "c-intent-3", "Pay invoice 4711 to ACME")
		mallory := "Pay invoice 4711 to MALLORY LTD"
		earlierID := a.TaskIDOf(earlier.KeyScope(), earlier.IntentID)
		guessedTag := earlierID[strings.LastIndex(earlierID, "~.")+2:]
		guessedUID := caldav.TaskID(req.KeyScope(), req.IntentID) + "~." + guessedTag
		guessedName := strings.TrimSuffix(untaggedName(t, req), ".ics") + "~." + guessedTag + ".ics"
		madeUp := request("c-intent-3", mallory).RequestDigest
		for name, p := range map[string]struct{ uid, digest string }{
			untaggedName(t, req): {caldav.TaskID(req.KeyScope(), req.IntentID), req.RequestDigest},
			guessedName:          {guessedUID, madeUp},
		} {
			if code := s.Put(s.ResourcePath(name), planted(p.uid, req.KeyScope(), req.IntentID, p.digest, mallory, copied)); code != http.StatusCreated {
				t.Fatalf("the planted PUT of %s answered %d", name, code)
			}
		}

		res := create(t, a, req)
		if res.Outcome != taskservice.Created || res.TaskID != a.TaskIDOf(req.KeyScope(), req.IntentID) {
			t.Fatalf("the real approval: %+v; want created %s (the planted task was taken as ours)", res, a.TaskIDOf(req.KeyScope(), req.IntentID))
		}
		if stored := s.Stored(nameOf(t, a, req)); !bytes.Contains(stored, []byte("SUMMARY:"+req.Task.Title)) {
			t.Errorf("the real task does not hold the approved title:\n%s", stored)
		}
		if again := create(t, a, req); again.Outcome != taskservice.Replayed || again.TaskID != res.TaskID {
			t.Errorf("the resend: %+v; want replayed %s", again, res.TaskID)
		}
		if found, ok, err := a.Find(ctx, req); err != nil || !ok || found.Outcome != taskservice.Replayed || found.TaskID != res.TaskID {
			t.Errorf("Find: %+v, %v, %v; want replayed %s", found, ok, err, res.TaskID)
		}

		l, err := a.ListTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		unproven := map[string]string{}
		for _, task := range l.Tasks {
			unproven[task.Where[strings.LastIndex(task.Where, "/")+1:]] = task.Unproven
		}
		want := map[string]bool{nameOf(t, a, earlier): false, nameOf(t, a, req): false, untaggedName(t, req): true, guessedName: true}
		if len(unproven) != len(want) {
			t.Errorf("listed %v; want %d tasks", unproven, len(want))
		}
		for name, bad := range want {
			if why, listed := unproven[name]; !listed || (why != "") != bad || bad && !strings.Contains(why, caldav.PropProof) {
				t.Errorf("%s: listed %v, unproven %q; want unproven %v, naming %s", name, listed, why, bad, caldav.PropProof)
			}
		}
	})
}

// A resource that holds the UID the task had before mark keys, under
// another name (a calendar user's copy, or a squatter's), made the create
// a permanent UID clash; the tagged UID cannot be guessed, so it no
// longer blocks the create.
func TestAResourceHoldingTheTasksUntaggedUIDUnderAnotherNameNoLongerBlocksTheCreate(t *testing.T) {
	onEachServer(t, func(t *testing.T, k davtest.Kind) {
		s, a := keyed(t, k)
		req := scoped("tenant-a", "c-intent-4", "Pay invoice 4712 to ACME")
		squat := planted(caldav.TaskID(req.KeyScope(), req.IntentID), req.KeyScope(), req.IntentID, req.RequestDigest, "squatted")
		if code := s.Put(s.ResourcePath("squatted-by-a-client.ics"), squat); code != http.StatusCreated {
			t.Fatalf("the squatting PUT answered %d", code)
		}
		if res := create(t, a, req); res.Outcome != taskservice.Created {
			t.Fatalf("Create: %+v; want created", res)
		}
	})
}

// A task of ours whose proof a calendar client removed or changed, or
// whose marks it changed under the proof, is no longer taken as ours:
// Create and Find refuse it for good, naming its href, and the listing
// says it is unproven. An edit a person makes to the task itself (its
// summary, its status) keeps it ours.
func TestATaskWhoseProofAClientEditedIsRefusedNamingItsHref(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(stored []byte) []byte
		refuse bool
	}{
		{"its proof removed", func(b []byte) []byte { return proofLine.ReplaceAll(b, nil) }, true},
		{"its proof changed", func(b []byte) []byte {
			return proofLine.ReplaceAll(b, []byte(caldav.PropProof+":"+strings.Repeat("0", proof.TagHexDigits)+"${2}"))
		}, true},
		{"its scope changed under the proof", func(b []byte) []byte {
			return bytes.Replace(b, []byte(caldav.PropScope+":tenant-a"), []byte(caldav.PropScope+":tenant-b"), 1)
		}, true},
		{"its summary and status changed by its owner", func(b []byte) []byte {
			b = bytes.Replace(b, []byte("STATUS:NEEDS-ACTION"), []byte("STATUS:COMPLETED"), 1)
			return regexp.MustCompile(`(?m)^SUMMARY:[^\r\n]*`).ReplaceAll(b, []byte("SUMMARY:done in my own words"))
		}, false},
	}
	onEachServer(t, func(t *testing.T, k davtest.Kind) {
		s, a := keyed(t, k)
		ctx := context.Background()
		var refusal error
		for i, c := range cases {
			req := scoped("tenant-a", "c-intent-edited-"+string(rune('a'+i)), "Pay invoice 4713 to ACME")
			create(t, a, req)
			name := nameOf(t, a, req)
			edited := c.edit(s.Stored(name))
			if bytes.Equal(edited, s.Stored(name)) {
				t.Fatalf("%s: the edit changed nothing:\n%s", c.name, edited)
			}
			if code := s.Put(s.ResourcePath(name), edited); code >= 300 {
				t.Fatalf("%s: the client's PUT answered %d", c.name, code)
			}
			res, err := a.Create(ctx, req)
			_, _, findErr := a.Find(ctx, req)
			if !c.refuse {
				if err != nil || res.Outcome != taskservice.Replayed || findErr != nil {
					t.Errorf("%s: Create %+v, %v; Find %v; want replayed", c.name, res, err, findErr)
				}
				continue
			}
			refusal = err
			for call, err := range map[string]error{"Create": err, "Find": findErr} {
				if !errors.Is(err, caldav.ErrUnproven) || !taskservice.IsPermanent(err) || !taskservice.IsNotCreated(err) ||
					!strings.Contains(err.Error(), s.ResourcePath(name)) || !strings.Contains(err.Error(), "created nothing") {
					t.Errorf("%s: %s: %v; want a permanent ErrUnproven, nothing created, naming %s", c.name, call, err, s.ResourcePath(name))
				}
			}
			if err := a.DeleteTask(ctx, req.KeyScope(), req.IntentID); err == nil || s.Stored(name) == nil {
				t.Errorf("%s: DeleteTask removed an unproven task: %v", c.name, err)
			}
		}
		l := listing(t, a)
		for _, task := range l.Tasks {
			refused := cases[task.IntentID[len(task.IntentID)-1]-'a'].refuse
			if (task.Unproven != "") != refused {
				t.Errorf("%s: listed unproven %q; want unproven %v", task.IntentID, task.Unproven, refused)
			}
		}
		t.Logf("a refusal reads: %v", refusal)
	})
}

// lines are the unfolded content lines of a stored resource, sorted, but
// those of name.
func lines(stored []byte, name string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(string(stored), "\r\n ", ""), "\r\n") {
		if l != "" && !strings.HasPrefix(l, name+":") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// A task made before the deployment had a mark key stays at its name of
// then, without a proof. The executors' intent ledger knows its key and
// routes a resend to Find, which with the key refuses it, saying that it
// must be proven first; KeepDeletedKeys then proves it from the ledger's
// entry (ProveLegacy writes the proof, nothing else), the resend is
// answered replayed, and a key new since the mark key is created under its
// tagged name.
func TestATaskMadeBeforeTheMarkKeyIsAnsweredOnlyOnceProven(t *testing.T) {
	onEachServer(t, func(t *testing.T, k davtest.Kind) {
		s, a := keyed(t, k)
		ctx := context.Background()
		ledger := startLedger(t)
		before, err := taskservice.KeepDeletedKeys(adapter(t, s.CollectionURL, caldav.Config{}), ledger)
		if err != nil {
			t.Fatal(err)
		}
		after, err := taskservice.KeepDeletedKeys(a, ledger)
		if err != nil {
			t.Fatal(err)
		}
		req := scoped("tenant-a", "c-intent-5", "Pay invoice 4714 to ACME")
		made, err := before.Create(ctx, req)
		if err != nil || made.Outcome != taskservice.Created || made.TaskID != caldav.TaskID(req.KeyScope(), req.IntentID) {
			t.Fatalf("the create before the mark key: %+v, %v", made, err)
		}
		name := untaggedName(t, req)
		unproven := s.Stored(name)

		_, _, err = a.Find(ctx, req)
		if !errors.Is(err, caldav.ErrUnproven) || !errors.Is(err, taskservice.ErrUnprovenLegacy) || !taskservice.IsPermanent(err) ||
			!strings.Contains(err.Error(), s.ResourcePath(name)) || !strings.Contains(err.Error(), "ProveLegacy") {
			t.Fatalf("the adapter's own lookup before the task is proven: %v; want a permanent ErrUnproven and ErrUnprovenLegacy naming %s and ProveLegacy", err, s.ResourcePath(name))
		}
		t.Logf("before proving: %v", err)
		if l := listing(t, a); len(l.Tasks) != 1 || l.Tasks[0].Unproven == "" {
			t.Errorf("the listing before proving: %+v; want the task, unproven", l.Tasks)
		}

		// The resend, through the intent ledger: its entry vouches for the
		// task, which is proven once and answered.
		if res, err := after.Create(ctx, req); err != nil || res.Outcome != taskservice.Replayed || res.TaskID != made.TaskID {
			t.Fatalf("the resend with the mark key: %+v, %v; want replayed %s", res, err, made.TaskID)
		}
		proven := s.Stored(name)
		if got, want := lines(proven, caldav.PropProof), lines(unproven, caldav.PropProof); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("proving changed more than the proof:\nbefore:\n%s\nafter:\n%s", unproven, proven)
		}
		if !proofLine.Match(proven) {
			t.Errorf("the proven task carries no proof:\n%s", proven)
		}
		e, known, err := ledger.Get(ctx, req.KeyScope(), req.IntentID)
		if err != nil || !known {
			t.Fatalf("the ledger's entry: %+v, %v, %v", e, known, err)
		}
		if changed, err := a.ProveLegacy(ctx, e); err != nil || changed {
			t.Fatalf("ProveLegacy once proven: %v, %v; want nothing to do", changed, err)
		}
		if l := listing(t, a); len(l.Tasks) != 1 || l.Tasks[0].Unproven != "" {
			t.Errorf("the listing once proven: %+v; want the task, proven", l.Tasks)
		}

		fresh := scoped("tenant-a", "c-intent-6", "Pay invoice 4715 to ACME")
		if res, err := after.Create(ctx, fresh); err != nil || res.Outcome != taskservice.Created || res.TaskID != a.TaskIDOf(fresh.KeyScope(), fresh.IntentID) || s.Stored(nameOf(t, a, fresh)) == nil {
			t.Errorf("a new key: %+v, %v; want created under its tagged name", res, err)
		}
		if e, _, err := ledger.Get(ctx, fresh.KeyScope(), fresh.IntentID); err != nil {
			t.Fatal(err)
		} else if changed, err := a.ProveLegacy(ctx, e); err != nil || changed {
			t.Errorf("ProveLegacy of a task made under the mark key: %v, %v; want nothing to do", changed, err)
		}

		if err := a.DeleteTask(ctx, req.KeyScope(), req.IntentID); err != nil {
			t.Fatalf("DeleteTask of the proven task: %v", err)
		}
		if res, err := after.Create(ctx, req); err != nil || res.Outcome != taskservice.Replayed || !res.TaskDeleted {
			t.Errorf("the resend once deleted: %+v, %v; want replayed, task deleted", res, err)
		}

		// The owner deletes the new key's tagged task; another client then
		// plants a task at the key's guessable name of before the mark key.
		if err := a.DeleteTask(ctx, fresh.KeyScope(), fresh.IntentID); err != nil {
			t.Fatalf("DeleteTask of the tagged task: %v", err)
		}
		path := s.ResourcePath(untaggedName(t, fresh))
		if code := s.Put(path, planted(caldav.TaskID(fresh.KeyScope(), fresh.IntentID), fresh.KeyScope(), fresh.IntentID, fresh.RequestDigest, "Pay invoice 4715 to MALLORY LTD")); code/100 != 2 {
			t.Fatalf("planting at %s answered %d", path, code)
		}
		if res, err := after.Create(ctx, fresh); err != nil || res.Outcome != taskservice.Replayed || !res.TaskDeleted || res.TaskID != a.TaskIDOf(fresh.KeyScope(), fresh.IntentID) {
			t.Errorf("the resend of a deleted tagged task with a plant at the older name: %+v, %v; want replayed, task deleted, its tagged task id", res, err)
		}
	})
}

// ProveLegacy writes a proof only into the task the ledger's entry names:
// anything else is refused, naming what it found, and left as it is.
func TestProveLegacyRefusesWhatIsNotTheLedgersTaskAndChangesNothing(t *testing.T) {
	onEachServer(t, func(t *testing.T, k davtest.Kind) {
		s, a := keyed(t, k)
		ctx := context.Background()
		old := adapter(t, s.CollectionURL, caldav.Config{})
		req := scoped("tenant-a", "c-intent-7", "Pay invoice 4716 to ACME")
		create(t, old, req)
		foreign := scoped("tenant-a", "c-intent-8", "Pay invoice 4717 to ACME")
		if code := s.Put(s.ResourcePath(untaggedName(t, foreign)), vtodo(caldav.TaskID(foreign.KeyScope(), foreign.IntentID), "theirs")); code != http.StatusCreated {
			t.Fatalf("the foreign PUT answered %d", code)
		}
		entry := func(r taskservice.Request) taskservice.LedgerEntry {
			return taskservice.LedgerEntry{Scope: r.Scope, IntentID: r.IntentID, RequestDigest: r.RequestDigest, TaskID: caldav.TaskID(r.KeyScope(), r.IntentID)}
		}
		otherDigest, otherUID := entry(req), entry(req)
		otherDigest.RequestDigest = request("c-intent-7", "another title").RequestDigest
		otherUID.TaskID = "someone-elses-task"
		for _, c := range []struct {
			name  string
			a     *caldav.Adapter
			e     taskservice.LedgerEntry
			is    error
			names string
		}{
			{"a task never made", a, entry(scoped("tenant-a", "c-intent-never", "none")), caldav.ErrNoTask, "c-intent-never"},
			{"another request digest", a, otherDigest, nil, otherDigest.RequestDigest},
			{"another UID", a, otherUID, nil, `"someone-elses-task"`},
			{"a resource not made by the adapter", a, entry(foreign), nil, "carries no " + caldav.PropRequestDigest},
			{"an adapter without a mark key", old, entry(req), nil, "no mark key"},
		} {
			stored := map[string][]byte{}
			for _, n := range s.StoredNames() {
				stored[n] = s.Stored(n)
			}
			changed, err := c.a.ProveLegacy(ctx, c.e)
			if changed || err == nil || c.is != nil && !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.names) || !strings.HasPrefix(err.Error(), "caldav: ") {
				t.Errorf("%s: %v, %v; want an error naming %q", c.name, changed, err, c.names)
			}
			for n, b := range stored {
				if !bytes.Equal(s.Stored(n), b) {
					t.Errorf("%s: %s changed", c.name, n)
				}
			}
		}
	})
}

// Proving writes the task back only as it was read: a change its owner
// makes in between (here, while the proving PUT is on its way) is kept,
// the proving call fails and says so, and proving again keeps the change.
// A server that gives no ETag is not written to at all.
func TestProvingNeverOverwritesAChangeMadeSinceItRead(t *testing.T) {
	t.Run("a change in between", func(t *testing.T) {
		davtest.Require(t, davtest.Radicale)
		s := davtest.Start(t, davtest.Radicale, davtest.Options{})
		p := davtest.NewProxy(t, s.BaseURL)
		a := adapter(t, p.Rewrite(s.CollectionURL), caldav.Config{MarkKey: markKey})
		req := scoped("tenant-a", "c-intent-9", "Pay invoice 4718 to ACME")
		create(t, adapter(t, s.CollectionURL, caldav.Config{}), req)
		name := untaggedName(t, req)
		e := taskservice.LedgerEntry{Scope: req.Scope, IntentID: req.IntentID, RequestDigest: req.RequestDigest, TaskID: caldav.TaskID(req.KeyScope(), req.IntentID)}

		hold := p.HoldRequest(http.MethodPut, s.ResourcePath(name))
		type outcome struct {
			changed bool
			err     error
		}
		proving := make(chan outcome, 1)
		go func() {
			changed, err := a.ProveLegacy(context.Background(), e)
			proving <- outcome{changed, err}
		}()
		<-hold.Caught()
		completed := bytes.Replace(s.Stored(name), []byte("STATUS:NEEDS-ACTION"), []byte("STATUS:COMPLETED"), 1)
		if code := s.Put(s.ResourcePath(name), completed); code >= 300 {
			t.Fatalf("the owner's PUT answered %d", code)
		}
		hold.Release()
		got := <-proving
		if got.changed || !errors.Is(got.err, taskservice.ErrTransient) || !strings.Contains(got.err.Error(), "changed since it was read") {
			t.Fatalf("ProveLegacy across the owner's change: %v, %v; want a transient error saying the task changed", got.changed, got.err)
		}
		if stored := s.Stored(name); !bytes.Contains(stored, []byte("STATUS:COMPLETED")) || proofLine.Match(stored) {
			t.Errorf("the owner's change was overwritten:\n%s", stored)
		}
		if changed, err := a.ProveLegacy(context.Background(), e); err != nil || !changed {
			t.Fatalf("proving again: %v, %v", changed, err)
		}
		if stored := s.Stored(name); !bytes.Contains(stored, []byte("STATUS:COMPLETED")) || !proofLine.Match(stored) {
			t.Errorf("proving again lost the owner's change or wrote no proof:\n%s", stored)
		}
	})
	t.Run("no ETag", func(t *testing.T) {
		req := scoped("tenant-a", "c-intent-10", "Pay invoice 4719 to ACME")
		uid := caldav.TaskID(req.KeyScope(), req.IntentID)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				t.Errorf("the adapter sent %s %s to a server that gave no ETag", r.Method, r.URL.Path)
			}
			_, _ = w.Write(planted(uid, req.KeyScope(), req.IntentID, req.RequestDigest, req.Task.Title))
		}))
		defer srv.Close()
		a := adapter(t, srv.URL+"/tasks/", caldav.Config{MarkKey: markKey})
		changed, err := a.ProveLegacy(context.Background(), taskservice.LedgerEntry{Scope: req.Scope, IntentID: req.IntentID, RequestDigest: req.RequestDigest, TaskID: uid})
		if changed || err == nil || !strings.Contains(err.Error(), "no ETag") || !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("ProveLegacy without an ETag: %v, %v; want an error saying that nothing was written", changed, err)
		}
	})
}
