package caldav

// This file holds what a mark key adds: the tag in a key's name and task
// id, the proof every VTODO written carries, the check of both on reading
// back, and the migration of the tasks made before the key.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/emersion/go-ical"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
)

// PropProof is the property that proves, with a mark key, that a VTODO was
// written by the deployment's executors: proof.Tag of its scope, intent
// id, request digest and UID.
const PropProof = "X-SENDTWICE-PROOF"

// The purposes of the two tags, so that neither stands for the other.
const (
	purposeName  = "caldav name"  // a key's resource name and task id
	purposeProof = "caldav proof" // a VTODO's PropProof
)

// ErrUnproven: with a mark key, the resource at the key's name claims the
// key (it carries our marks) without a valid PropProof: planted or edited
// by someone else, or made before the key and not yet proven.
var ErrUnproven = errors.New("caldav: the resource at the intent's name carries no valid proof that the deployment's executors made it")

// keyScope is scope, or taskservice.DefaultScope when it is empty.
func keyScope(scope string) string {
	if scope == "" {
		return taskservice.DefaultScope
	}
	return scope
}

// nameTag is the tag of (scope, intentID) under the mark key.
func (a *Adapter) nameTag(scope, intentID string) string {
	return proof.Tag(a.markKey, purposeName, keyScope(scope), intentID)
}

// ResourceNameOf is the name of the resource of (scope, intentID) in the
// collection: ScopedResourceName's, and with a mark key the tag before
// ".ics" ("team-a~~intent-0001~.<32 hexadecimal digits>.ics").
func (a *Adapter) ResourceNameOf(scope, intentID string) (string, error) {
	if a.markKey == nil {
		return ScopedResourceName(scope, intentID)
	}
	return taggedResourceName(scope, intentID, a.nameTag(scope, intentID))
}

// TaskIDOf is the task id (the VTODO's UID) the adapter gives the task of
// (scope, intentID): TaskID's, and with a mark key "~." and the tag after
// it.
func (a *Adapter) TaskIDOf(scope, intentID string) string {
	id := TaskID(scope, intentID)
	if a.markKey == nil {
		return id
	}
	return id + tagSeparator + a.nameTag(scope, intentID)
}

// proofOf is the PropProof of a VTODO of (scope, intentID) with digest and
// uid; "" without a mark key.
func (a *Adapter) proofOf(scope, intentID, digest, uid string) string {
	if a.markKey == nil {
		return ""
	}
	return proof.Tag(a.markKey, purposeProof, keyScope(scope), intentID, digest, uid)
}

// unproven says why todo's claim on its key is not proven under the mark
// key; "" when it is proven, and for every VTODO without a mark key.
func (a *Adapter) unproven(todo *ical.Component) string {
	if a.markKey == nil {
		return ""
	}
	tag := propText(todo, PropProof)
	if tag == "" {
		return "it carries no " + PropProof + " (planted by someone else, or made before the mark key and not yet proven)"
	}
	if !proof.Valid(a.markKey, tag, purposeProof, todoScope(todo), propText(todo, PropIntentID), propText(todo, PropRequestDigest), propText(todo, ical.PropUID)) {
		return "its " + PropProof + " does not match its scope, intent id, request digest and UID under the mark key (planted, or edited by someone else)"
	}
	return ""
}

// unprovenError is the permanent ErrUnproven refusal of the resource at
// target, marked taskservice.NotCreated; legacy: found at the name of
// before the mark key.
func unprovenError(target *url.URL, todo *ical.Component, why string, legacy bool) error {
	advice, also := "a calendar client may have edited it: remove the resource, or restore the task as it was made", error(nil)
	if legacy {
		advice = "a task made before the deployment had a mark key is taken only once it is proven from the executors' intent ledger (Adapter.ProveLegacy, which taskservice.KeepDeletedKeys calls)"
		also = taskservice.ErrUnprovenLegacy
	}
	err := fmt.Errorf(
		"%w: %s holds a task that claims intent %q in scope %q (UID %q, request digest %s), but %s; it is not taken as the pipeline's task, this call created nothing and the resource is left as it is; %s",
		ErrUnproven, target, propText(todo, PropIntentID), todoScope(todo), propText(todo, ical.PropUID), propText(todo, PropRequestDigest), why, advice)
	if also != nil {
		err = fmt.Errorf("%w (%w)", err, also)
	}
	return taskservice.Permanent(taskservice.NotCreated(err))
}

// located is what locate found of a key's resource.
type located struct {
	target *url.URL       // where it was found; the key's name when nowhere
	cal    *ical.Calendar // nil: no resource at either name
	etag   string
	legacy bool // found at the name of before the mark key
}

// locate reads the resource of (scope, intentID) at its name
// (ResourceNameOf) and, with a mark key when that is absent, at its name of
// before the key (ScopedResourceName), where a task made then still is.
func (a *Adapter) locate(ctx context.Context, scope, intentID string) (located, error) {
	name, err := a.ResourceNameOf(scope, intentID)
	if err != nil {
		return located{}, taskservice.Permanent(err)
	}
	names := []string{name}
	if a.markKey != nil {
		// It fits: the tagged name is longer.
		old, _ := ScopedResourceName(scope, intentID)
		names = append(names, old)
	}
	for i, n := range names {
		at := located{target: a.urlOf(n), legacy: i > 0}
		cal, resp, err := a.get(ctx, at.target)
		if err != nil {
			return located{}, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			at.cal, at.etag = cal, resp.Header.Get("ETag")
			return at, nil
		case http.StatusNotFound, http.StatusGone:
			continue
		}
		return located{}, a.statusError("GET", at.target, resp, false)
	}
	return located{target: a.urlOf(name)}, nil
}

// ProveLegacy proves a task made before the deployment had a mark key, so
// that Find takes it as the pipeline's: it reads the resource at the name
// of e's key without a tag (ScopedResourceName) and, when it is this
// adapter's task for that key with e.RequestDigest and the UID e.TaskID
// and carries no valid proof, writes it back with PropProof set (a PUT
// with If-Match on its ETag; nothing else changes). changed is false for a
// task already proven, and for an entry whose task id is TaskIDOf's (made
// under the mark key: nothing to prove). An absent resource is an error
// wrapping ErrNoTask; a resource of another digest, another UID, another
// key, or not ours, is an error naming it, and nothing is written.
func (a *Adapter) ProveLegacy(ctx context.Context, e taskservice.LedgerEntry) (changed bool, err error) {
	if a.markKey == nil {
		return false, taskservice.Permanent(errors.New("caldav: ProveLegacy: the adapter has no mark key (Config.MarkKey) to prove with"))
	}
	scope := keyScope(e.Scope)
	if e.TaskID == a.TaskIDOf(scope, e.IntentID) {
		return false, nil
	}
	name, err := ScopedResourceName(scope, e.IntentID)
	if err != nil {
		return false, taskservice.Permanent(fmt.Errorf("caldav: proving the task of intent %q in scope %q: %w", e.IntentID, scope, err))
	}
	target := a.urlOf(name)
	cal, resp, err := a.get(ctx, target)
	if err != nil {
		return false, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusGone:
		return false, taskservice.Permanent(fmt.Errorf("caldav: proving %s, the task of intent %q in scope %q: %w (deleted by its owner, or never made)", target, e.IntentID, scope, ErrNoTask))
	default:
		return false, a.statusError("GET", target, resp, false)
	}
	todo := findTodo(cal)
	if differs := legacyMismatch(todo, e, scope); differs != "" {
		return false, taskservice.Permanent(fmt.Errorf("caldav: proving %s, the task of intent %q in scope %q: %s; nothing was written", target, e.IntentID, scope, differs))
	}
	if a.unproven(todo) == "" {
		return false, nil
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		return false, taskservice.Permanent(fmt.Errorf("caldav: proving %s: the server gave no ETag, without which the task cannot be written back without overwriting a change made since; nothing was written", target))
	}
	todo.Props.Del(PropProof)
	setText(todo, PropProof, a.proofOf(scope, e.IntentID, e.RequestDigest, e.TaskID))
	if err := a.writeBack(ctx, target, etag, cal); err != nil {
		return false, err
	}
	return true, nil
}

// legacyMismatch says how todo differs from the task e's ledger entry
// names in scope; "" when it is that task.
func legacyMismatch(todo *ical.Component, e taskservice.LedgerEntry, scope string) string {
	if todo == nil {
		return "it holds no task (no VTODO with a UID)"
	}
	uid, digest := propText(todo, ical.PropUID), propText(todo, PropRequestDigest)
	switch {
	case digest == "":
		return fmt.Sprintf("its task (UID %q) carries no %s: not made by this adapter, or its marks were removed", uid, PropRequestDigest)
	case propText(todo, PropIntentID) != e.IntentID:
		return fmt.Sprintf("its task (UID %q) belongs to intent %q", uid, propText(todo, PropIntentID))
	case todoScope(todo) != scope:
		return fmt.Sprintf("its task (UID %q) belongs to scope %q", uid, todoScope(todo))
	case digest != e.RequestDigest:
		return fmt.Sprintf("its task (UID %q) has the request digest %s, the intent ledger %s", uid, digest, e.RequestDigest)
	case uid != e.TaskID:
		return fmt.Sprintf("its task has the UID %q, the intent ledger %q", uid, e.TaskID)
	}
	return ""
}

// writeBack replaces the resource at target with cal, only if its ETag is
// still etag.
func (a *Adapter) writeBack(ctx context.Context, target *url.URL, etag string, cal *ical.Calendar) error {
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		return taskservice.Permanent(fmt.Errorf("caldav: proving %s: encoding the task: %w", target, err))
	}
	status, err := a.sendIfMatch(ctx, http.MethodPut, target, etag, buf.Bytes())
	if status == http.StatusPreconditionFailed {
		return taskservice.Transient(fmt.Errorf("caldav: proving %s: the task changed since it was read (412); nothing was written, proving again reads it anew", target))
	}
	return err
}
