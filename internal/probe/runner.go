package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// Suite returns the target as the conformance suite takes it: the same
// hooks, and requests that carry a task-request.v1 document of their own
// naming the target's provider and destination, as the executor's calls
// carry the approved one, so that a service that checks the request
// against the call (the fake task service) answers the rows as it answers
// the executor; the digest is the document's.
func (t Target) Suite() servicetest.Target {
	st := t.Target
	st.Document = func(req taskservice.Request) taskservice.Request { return withDocument(req, t.Provider, t.Destination) }
	return st
}

// withDocument gives req its task-request.v1 document and digest.
func withDocument(req taskservice.Request, provider, destination string) taskservice.Request {
	intent := req.IntentID
	sum := sha256.Sum256([]byte("sendtwice probe\x00" + intent))
	if provider == "" {
		provider = document.ProviderFake
	}
	if destination == document.DefaultDestination {
		destination = ""
	}
	q := document.Request{SchemaVersion: document.RequestVersion, RequestID: req.RequestID, IntentID: intent,
		Scope: req.Scope, Operation: document.OperationCreateTask, Provider: provider, Destination: destination,
		CandidateRef: document.CandidateRef{CandidateID: req.CandidateID, CandidateDigest: "sha256:" + hex.EncodeToString(sum[:]), SourceVersion: req.SourceVersion},
		Task:         document.Task{Title: req.Task.Title}}
	doc, err := json.Marshal(q)
	var digest string
	if err == nil {
		digest, err = canon.DigestExact(doc)
	}
	if err != nil {
		// The ids and the title are made by the rows, of printable text:
		// JSON and RFC 8785 represent them.
		panic(fmt.Sprintf("probe: making the request of %s: %v", intent, err))
	}
	req.RequestDigest, req.Request = digest, doc
	req.Provider, req.Destination = provider, q.DestinationName()
	return req
}

// cleanup deletes the tasks of the run's intent ids at its end, unless
// told to keep them, and counts what is left. It runs also when ctx ended
// early, on a context of its own, so that a stopped run leaves no more
// than it must.
func cleanup(ctx context.Context, t Target, p Plan) Cleanup {
	c := Cleanup{Intents: []string{}, Failed: []string{}}
	if t.Count == nil {
		c.Note = "the run's tasks were left in place: the target cannot count them"
		return c
	}
	timeout := p.opts.CallTimeout
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(len(p.Intents)+1)*2*timeout)
	defer cancel()
	count := func(intent string) (int, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return t.Count(cctx, intent)
	}
	for _, intent := range p.Intents {
		n, err := count(intent)
		if err != nil {
			c.Failed = append(c.Failed, fmt.Sprintf("%s: counting its tasks failed: %v", intent, err))
			continue
		}
		if n == 0 {
			continue
		}
		c.Intents = append(c.Intents, intent)
		if p.opts.KeepTasks || t.Delete == nil {
			c.Left += n
			continue
		}
		// Only the run's own keys, in its own scope.
		if !p.own(intent) || !strings.HasPrefix(intent, Prefix) {
			c.Failed = append(c.Failed, fmt.Sprintf("%s: not this run's, left as it is", intent))
			continue
		}
		dctx, dcancel := context.WithTimeout(ctx, timeout)
		err = t.Delete(dctx, Scope, intent)
		dcancel()
		left, cerr := count(intent)
		switch {
		case err != nil:
			c.Failed = append(c.Failed, fmt.Sprintf("%s: deleting its %s failed: %v", intent, plural(n, "task"), err))
			c.Left += n
		case cerr != nil:
			c.Failed = append(c.Failed, fmt.Sprintf("%s: counting its tasks after the deletion failed: %v", intent, cerr))
		default:
			c.Deleted += n - left
			c.Left += left
		}
	}
	switch {
	case p.opts.KeepTasks:
		c.Kept = true
	case t.Delete == nil && c.Left > 0:
		c.Note = fmt.Sprintf("%s of this run left in place: the target cannot delete a task", plural(c.Left, "task"))
	}
	return c
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
