package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/sendtwice/sendtwice/internal/canon"
)

// This file checks a create call against the request document it carries:
// the service creates only what the request says, and only when the request
// hashes to the call's digest. It reads the request with the strict JSON
// parser of the call itself and knows no more of the document than the
// members it compares; the full document's rules belong to the gate.

// The request document a create call carries: its schema version, and the
// operation and provider it must name for this service to act on it.
const (
	RequestVersion   = "task-request.v1"
	RequestOperation = "create_task"
	RequestProvider  = "fake-task-provider.v1"
	// RequestDestination is the one destination the service is: a request
	// may name it or none.
	RequestDestination = "default"
)

// Checks of a create call against its request, named in refusals (Refusal)
// and in the error replies.
const (
	// CheckRequestFormat fails when the call carries no request document,
	// or one that is not a task-request.v1 object with exactly its
	// members, each of its type.
	CheckRequestFormat = "request_format"
	// CheckRequestDigest fails when the request document does not hash to
	// the call's request_digest.
	CheckRequestDigest = "request_digest"
	// CheckRequestBinding fails when a member of the call (intent_id,
	// request_id, task) differs from the request's, or the request does not
	// ask this service to create a task.
	CheckRequestBinding = "request_binding"
	// CheckKeyDeadline refuses a call for a key the service does not
	// know whose deadline (not_after plus the clock allowance and the
	// margin) has passed by the service's clock: its key would be
	// compacted at once, so a resend could create again.
	CheckKeyDeadline = "key_deadline"
)

// ErrRefused marks a well-formed create call that the service refused
// because it does not match its request document. Unlike an invalid
// request, it is recorded (outcome "refused"); nothing is created.
var ErrRefused = errors.New("provider: create refused")

// RefusedError is the store's answer to a refused create call: why, and the
// sequence of the request record that keeps the refusal. It wraps
// ErrRefused.
type RefusedError struct {
	Refusal
	RequestSeq uint64
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v: %s", ErrRefused, e.reply())
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// reply is the text of the "400" error reply: the check, the field, why,
// and where the refusal is recorded.
func (e *RefusedError) reply() string {
	return fmt.Sprintf("refused: %s failed at %s: %s (recorded as request %d; nothing was created)", e.Check, e.Field, e.Reason, e.RequestSeq)
}

// requestLimits bound a request document given as bytes (CreateRequest.Request
// in a call made by function): as a member of a call's body it is far
// smaller than the body's own limit.
var requestLimits = canon.Limits{MaxBytes: bodyLimits.MaxBytes, MaxDepth: bodyLimits.MaxDepth, ExactNumbers: true}

// requestDoc is what the service reads of a request document.
type requestDoc struct {
	Scope     string // "" when the document names none
	IntentID  string
	RequestID string
	Operation string
	Provider  string
	// Destination is the request's destination, "" when it names none.
	Destination string
	Task        Task
}

// parseRequest parses a request document given as bytes, strictly.
func parseRequest(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, fieldErr("request", "missing; a create call carries the %s document its request_digest was computed over", RequestVersion)
	}
	v, err := canon.Parse(data, requestLimits)
	if err != nil {
		return nil, fieldErr("request", "not strict JSON: %s", strings.TrimPrefix(err.Error(), "canon: "))
	}
	return v, nil
}

// required refuses a member of m (at path parent) that is missing.
func required(parent string, m map[string]any, names ...string) error {
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return fieldErr(fieldPath(parent, n), "missing")
		}
	}
	return nil
}

// object reads the member name of m as an object with exactly the members
// named.
func object(parent string, m map[string]any, name string, names ...string) (map[string]any, error) {
	path := fieldPath(parent, name)
	v, ok := m[name].(map[string]any)
	if !ok {
		return nil, fieldErr(path, "must be a JSON object, not %s", canon.TypeName(m[name]))
	}
	if err := members(path, v, names...); err != nil {
		return nil, err
	}
	return v, required(path, v, names...)
}

// readRequest reads a request document's tree strictly: a task-request.v1
// object with exactly its members, each of its type. A tree that is not
// one makes the call malformed (ErrInvalidRequest).
func readRequest(tree any) (requestDoc, error) {
	if tree == nil {
		return requestDoc{}, fieldErr("request", "missing; a create call carries the %s document its request_digest was computed over", RequestVersion)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return requestDoc{}, fieldErr("request", "must be a JSON object (a %s document), not %s", RequestVersion, canon.TypeName(tree))
	}
	top := []string{"schema_version", "request_id", "intent_id", "operation", "provider", "candidate_ref", "task"}
	if err := members("request", m, append(top, "scope", "destination")...); err != nil {
		return requestDoc{}, err
	}
	if err := required("request", m, top...); err != nil {
		return requestDoc{}, err
	}
	sv, err := str("request", m, "schema_version")
	if err != nil {
		return requestDoc{}, err
	}
	if sv != RequestVersion {
		return requestDoc{}, fieldErr("request.schema_version", "must be %q", RequestVersion)
	}
	var d requestDoc
	for _, f := range []struct {
		name string
		dst  *string
	}{{"request_id", &d.RequestID}, {"intent_id", &d.IntentID}, {"operation", &d.Operation}, {"provider", &d.Provider}} {
		if *f.dst, err = str("request", m, f.name); err != nil {
			return requestDoc{}, err
		}
	}
	if _, ok := m["scope"]; ok {
		if d.Scope, err = str("request", m, "scope"); err != nil {
			return requestDoc{}, err
		}
		if !ValidScope(d.Scope) {
			return requestDoc{}, fieldErr("request.scope", "%q is not a scope: 1 to %d bytes of a-z, 0-9, '-' and '_', starting with a letter or digit", d.Scope, MaxScopeBytes)
		}
	}
	if _, ok := m["destination"]; ok {
		// This service is one destination: the default one.
		if d.Destination, err = str("request", m, "destination"); err != nil {
			return requestDoc{}, err
		}
		if d.Destination != RequestDestination {
			return requestDoc{}, fieldErr("request.destination", "%q is not served here: this service is the destination %q only", d.Destination, RequestDestination)
		}
	}
	ref, err := object("request", m, "candidate_ref", "candidate_id", "candidate_digest", "source_version")
	if err != nil {
		return requestDoc{}, err
	}
	for _, n := range []string{"candidate_id", "candidate_digest", "source_version"} {
		if _, err := str("request.candidate_ref", ref, n); err != nil {
			return requestDoc{}, err
		}
	}
	tm, err := object("request", m, "task", "title", "assignee_person_ref", "due_at")
	if err != nil {
		return requestDoc{}, err
	}
	if d.Task.Title, err = str("request.task", tm, "title"); err != nil {
		return requestDoc{}, err
	}
	if d.Task.AssigneePersonRef, err = nullableStr("request.task", tm, "assignee_person_ref"); err != nil {
		return requestDoc{}, err
	}
	if d.Task.DueAt, err = nullableStr("request.task", tm, "due_at"); err != nil {
		return requestDoc{}, err
	}
	return d, nil
}

// formatRefusal turns a request document that cannot be read into the
// refusal of its call.
func formatRefusal(err error) *Refusal {
	if fe, ok := errors.AsType[*FieldError](err); ok {
		return &Refusal{Check: CheckRequestFormat, Field: fe.Field, Reason: fe.Reason}
	}
	return &Refusal{Check: CheckRequestFormat, Field: "request", Reason: err.Error()}
}

// bindRequest checks a well-formed call (validateCreate passed) against its
// request document's tree and returns nil, or why the request does not back
// the call: it is missing or not a request document (CheckRequestFormat),
// it does not hash to the call's digest (CheckRequestDigest), or the call
// or the request's target differs (CheckRequestBinding). On success the
// call's request id, when it was left out, is the request's, and its task
// is the request's.
func bindRequest(tree any, req *CreateRequest) *Refusal {
	d, err := readRequest(tree)
	if err != nil {
		return formatRefusal(err)
	}
	digest, err := canon.DigestTree(tree)
	if err != nil {
		return formatRefusal(fieldErr("request", "cannot be canonicalized: %s", strings.TrimPrefix(err.Error(), "canon: ")))
	}
	refuse := func(check, field, format string, args ...any) *Refusal {
		return &Refusal{Check: check, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case digest != req.RequestDigest:
		return refuse(CheckRequestDigest, "request_digest",
			"the request document digests to %s, not to the call's request_digest %s: the digest was not computed over this request", digest, req.RequestDigest)
	case d.keyScope() != req.Scope:
		return refuse(CheckRequestBinding, "scope", "the call is for scope %q, but its request is for scope %q", req.Scope, d.keyScope())
	case d.IntentID != req.IntentID:
		return refuse(CheckRequestBinding, "intent_id", "the call is for intent %q, but its request is for intent %q", req.IntentID, d.IntentID)
	case req.RequestID != "" && d.RequestID != req.RequestID:
		return refuse(CheckRequestBinding, "request_id", "the call names request %q, but its request is %q", req.RequestID, d.RequestID)
	case d.Task.Title != req.Task.Title:
		return refuse(CheckRequestBinding, "task.title", "the call's task title differs from its request's")
	case !sameRef(d.Task.AssigneePersonRef, req.Task.AssigneePersonRef):
		return refuse(CheckRequestBinding, "task.assignee_person_ref", "the call's assignee (%s) differs from its request's (%s)",
			showRef(req.Task.AssigneePersonRef), showRef(d.Task.AssigneePersonRef))
	case !sameRef(d.Task.DueAt, req.Task.DueAt):
		return refuse(CheckRequestBinding, "task.due_at", "the call's due date (%s) differs from its request's (%s)",
			showRef(req.Task.DueAt), showRef(d.Task.DueAt))
	case d.Operation != RequestOperation:
		return refuse(CheckRequestBinding, "request.operation", "the request asks for %q; this service does %q only", d.Operation, RequestOperation)
	case d.Provider != RequestProvider:
		return refuse(CheckRequestBinding, "request.provider", "the request is addressed to %q, not to this service (%s)", d.Provider, RequestProvider)
	}
	if req.RequestID == "" {
		req.RequestID = d.RequestID
	}
	req.Task = d.Task
	return nil
}

// keyScope is the scope the request's key is in: its own, or "default".
func (d requestDoc) keyScope() string {
	if d.Scope == "" {
		return DefaultScope
	}
	return d.Scope
}

func sameRef(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func showRef(p *string) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *p)
}

// checkCreate is the whole check of a create call made by function: the
// call's own members (validateCreate; an error makes the call invalid),
// then its request document (a refusal). It returns the call as the
// service acts on it.
func checkCreate(req CreateRequest) (CreateRequest, *Refusal, error) {
	if err := validateCreate(&req); err != nil {
		return CreateRequest{}, nil, err
	}
	tree, err := parseRequest(req.Request)
	if err != nil {
		return req, formatRefusal(err), nil
	}
	return req, bindRequest(tree, &req), nil
}

// RequestFor returns the create call for a task-request.v1 document: its
// intent id, request id and task read from it as the service reads them,
// its digest recomputed, and the document itself. Set CallRef before
// sending it.
func RequestFor(request []byte) (CreateRequest, error) {
	tree, err := parseRequest(request)
	if err != nil {
		return CreateRequest{}, err
	}
	d, err := readRequest(tree)
	if err != nil {
		return CreateRequest{}, err
	}
	digest, err := canon.DigestTree(tree)
	if err != nil {
		return CreateRequest{}, fieldErr("request", "cannot be canonicalized: %s", strings.TrimPrefix(err.Error(), "canon: "))
	}
	return CreateRequest{Scope: d.keyScope(), IntentID: d.IntentID, RequestDigest: digest, RequestID: d.RequestID, Task: d.Task,
		Request: append([]byte(nil), request...)}, nil
}

// NewRequest returns a create call for task under intentID, with a
// task-request.v1 document made for it: request id "task-request-" and the
// intent id, and a candidate_ref that names no real candidate (candidate id
// "cand-" and the intent id, source version "none"). It is for callers that
// have no approved request, such as benchmarks and examples: no approval
// covers such a request, so it never passes the executors' gate.
func NewRequest(intentID string, task Task) (CreateRequest, error) {
	return NewScopedRequest("", intentID, task)
}

// NewScopedRequest is NewRequest for a key in scope: the request document
// names the scope (none when scope is ""; the call is then in "default").
func NewScopedRequest(scope, intentID string, task Task) (CreateRequest, error) {
	sum := sha256.Sum256([]byte(scope + "\x00" + intentID))
	if scope == "" {
		sum = sha256.Sum256([]byte(intentID))
	}
	ref := func(p *string) any {
		if p == nil {
			return nil
		}
		return *p
	}
	fields := map[string]any{
		"schema_version": RequestVersion,
		"request_id":     "task-request-" + intentID,
		"intent_id":      intentID,
		"operation":      RequestOperation,
		"provider":       RequestProvider,
		"candidate_ref": map[string]any{
			"candidate_id":     "cand-" + intentID,
			"candidate_digest": digestPrefix + hex.EncodeToString(sum[:]),
			"source_version":   "none",
		},
		"task": map[string]any{"title": task.Title, "assignee_person_ref": ref(task.AssigneePersonRef), "due_at": ref(task.DueAt)},
	}
	if scope != "" {
		fields["scope"] = scope
	}
	doc, err := canon.Encode(fields)
	if err != nil {
		return CreateRequest{}, fmt.Errorf("provider: make a request for intent %q: %w", intentID, err)
	}
	return RequestFor(doc)
}
