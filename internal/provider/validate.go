package provider

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/taskservice"
)

// Errors returned by this package. Callers test them with errors.Is.
var (
	// ErrInvalidRequest marks a call that is not well formed; the service
	// answers it with code "400" and records nothing.
	ErrInvalidRequest = errors.New("provider: invalid request")
	// ErrClosed is returned by a Store after Close.
	ErrClosed = errors.New("provider: store closed")
	// ErrCorrupt marks a stored record or counter that cannot be read back.
	ErrCorrupt = errors.New("provider: stored data unreadable")
)

// Limits of a create request.
const (
	MaxIntentIDBytes  = 256
	MaxRequestIDBytes = 256
	MaxTitleBytes     = 1024
	MaxRefBytes       = 256 // assignee_person_ref and due_at
	// MaxRecordsLimit bounds one page of the records endpoint.
	MaxRecordsLimit = 1000
	// DefaultRecordsLimit is the page size when RecordsRequest.Limit is 0.
	DefaultRecordsLimit = 100
)

const digestPrefix = "sha256:"

// FieldError says which member of a request is wrong and why. It wraps
// ErrInvalidRequest.
type FieldError struct {
	Field  string // JSON path, e.g. "intent_id" or "task.title"; "body" for the document itself
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidRequest, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidRequest) hold.
func (e *FieldError) Unwrap() error { return ErrInvalidRequest }

// reply is the text used in an error reply: the field and what is wrong.
func (e *FieldError) reply() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// bodyLimits bound the body of a call: every valid one is far smaller.
var bodyLimits = canon.Limits{MaxBytes: 64 << 10, MaxDepth: 8}

// parseBody parses the body of a call with the project's strict JSON parser
// (duplicate member names, invalid UTF-8, lone surrogates and trailing data
// are refused) and returns its top-level object.
func parseBody(data []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fieldErr("body", "empty; a JSON object is required")
	}
	v, err := canon.Parse(data, bodyLimits)
	if err != nil {
		var ce *canon.Error
		if errors.Is(err, canon.ErrDuplicateName) && errors.As(err, &ce) {
			if q, ok := strings.CutPrefix(ce.Reason, "duplicate member name "); ok {
				if name, uerr := strconv.Unquote(q); uerr == nil {
					return nil, fieldErr(fieldPath(strings.TrimPrefix(strings.TrimPrefix(ce.Path, "$"), "."), name),
						"duplicate member; each member may appear once")
				}
			}
		}
		return nil, fieldErr("body", "not strict JSON: %s", strings.TrimPrefix(err.Error(), "canon: "))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr("body", "must be a JSON object, not %s", canon.TypeName(v))
	}
	return m, nil
}

func fieldPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// members refuses members of m (at path parent) not named in known. Names
// are compared exactly: a case variant is unknown, and the reason says which
// member it resembles.
func members(parent string, m map[string]any, known ...string) error {
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	first := slices.Min(unknown)
	for _, k := range known {
		if strings.EqualFold(k, first) {
			return fieldErr(fieldPath(parent, first), "unknown member (member names are case-sensitive: did you mean %q?)", k)
		}
	}
	return fieldErr(fieldPath(parent, first), "unknown member")
}

// str reads an optional string member; absent is "".
func str(parent string, m map[string]any, name string) (string, error) {
	v, ok := m[name]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fieldErr(fieldPath(parent, name), "must be a JSON string, not %s", canon.TypeName(v))
	}
	return s, nil
}

// nullableStr reads an optional member that is a string or null.
func nullableStr(parent string, m map[string]any, name string) (*string, error) {
	if v, ok := m[name]; !ok || v == nil {
		return nil, nil
	}
	s, err := str(parent, m, name)
	return &s, err
}

// whole reads an optional whole number member; absent is 0.
func whole(parent string, m map[string]any, name string, allowNegative bool) (int64, error) {
	v, ok := m[name]
	if !ok {
		return 0, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fieldErr(fieldPath(parent, name), "must be a JSON number, not %s", canon.TypeName(v))
	}
	if f != math.Trunc(f) || f > 1<<53 || f < -(1<<53) {
		return 0, fieldErr(fieldPath(parent, name), "must be a whole number up to 2^53")
	}
	if f < 0 && !allowNegative {
		return 0, fieldErr(fieldPath(parent, name), "negative")
	}
	return int64(f), nil
}

// decodeCreate parses and validates the body of a create call strictly,
// then checks it against its request document (bindRequest). A malformed
// call (a body that is not strict JSON, unknown members, an invalid intent
// id, digest, request id, call reference or task) is an error; a
// well-formed call whose request does not back it comes back with its
// refusal, to be recorded as refused.
func decodeCreate(data []byte) (CreateRequest, *Refusal, error) {
	m, err := parseBody(data)
	if err != nil {
		return CreateRequest{}, nil, err
	}
	if err := members("", m, "scope", "intent_id", "request_digest", "request_id", "task", "call_ref", "request", "not_after"); err != nil {
		return CreateRequest{}, nil, err
	}
	var req CreateRequest
	for _, f := range []struct {
		name string
		dst  *string
	}{{"scope", &req.Scope}, {"intent_id", &req.IntentID}, {"request_digest", &req.RequestDigest}, {"request_id", &req.RequestID},
		{"call_ref", &req.CallRef}, {"not_after", &req.NotAfter}} {
		if *f.dst, err = str("", m, f.name); err != nil {
			return CreateRequest{}, nil, err
		}
	}
	if tv, ok := m["task"]; ok {
		tm, ok := tv.(map[string]any)
		if !ok {
			return CreateRequest{}, nil, fieldErr("task", "must be a JSON object, not %s", canon.TypeName(tv))
		}
		if err := members("task", tm, "title", "assignee_person_ref", "due_at"); err != nil {
			return CreateRequest{}, nil, err
		}
		if req.Task.Title, err = str("task", tm, "title"); err != nil {
			return CreateRequest{}, nil, err
		}
		if req.Task.AssigneePersonRef, err = nullableStr("task", tm, "assignee_person_ref"); err != nil {
			return CreateRequest{}, nil, err
		}
		if req.Task.DueAt, err = nullableStr("task", tm, "due_at"); err != nil {
			return CreateRequest{}, nil, err
		}
	}
	if _, present := m["scope"]; present && req.Scope == "" {
		return CreateRequest{}, nil, fieldErr("scope", "empty; leave it out for the default scope %q", DefaultScope)
	}
	if _, present := m["not_after"]; present && req.NotAfter == "" {
		return CreateRequest{}, nil, fieldErr("not_after", "empty; leave it out for an approval that never expires")
	}
	if err := validateCreate(&req); err != nil {
		return CreateRequest{}, nil, err
	}
	return req, bindRequest(m["request"], &req), nil
}

// decodeRecords parses the body of a records call strictly.
func decodeRecords(data []byte) (RecordsRequest, error) {
	m, err := parseBody(data)
	if err != nil {
		return RecordsRequest{}, err
	}
	if err := members("", m, "kind", "scope", "intent_id", "after_seq", "limit"); err != nil {
		return RecordsRequest{}, err
	}
	var req RecordsRequest
	if req.Kind, err = str("", m, "kind"); err != nil {
		return RecordsRequest{}, err
	}
	if req.Scope, err = str("", m, "scope"); err != nil {
		return RecordsRequest{}, err
	}
	if req.IntentID, err = str("", m, "intent_id"); err != nil {
		return RecordsRequest{}, err
	}
	after, err := whole("", m, "after_seq", false)
	if err != nil {
		return RecordsRequest{}, err
	}
	req.AfterSeq = uint64(after)
	limit, err := whole("", m, "limit", true)
	if err != nil {
		return RecordsRequest{}, err
	}
	req.Limit = int(limit)
	return req, nil
}

// decodeDelete parses the body of a delete call strictly and checks it.
func decodeDelete(data []byte) (DeleteRequest, error) {
	m, err := parseBody(data)
	if err != nil {
		return DeleteRequest{}, err
	}
	if err := members("", m, "scope", "intent_id", "task_id"); err != nil {
		return DeleteRequest{}, err
	}
	var req DeleteRequest
	for _, f := range []struct {
		name string
		dst  *string
	}{{"scope", &req.Scope}, {"intent_id", &req.IntentID}, {"task_id", &req.TaskID}} {
		if *f.dst, err = str("", m, f.name); err != nil {
			return DeleteRequest{}, err
		}
	}
	return checkDelete(req)
}

// checkDelete checks a delete: a task id alone, or a key (an intent id,
// with a scope or in "default"); it returns the delete with its scope set.
func checkDelete(req DeleteRequest) (DeleteRequest, error) {
	switch {
	case req.TaskID != "" && (req.IntentID != "" || req.Scope != ""):
		return DeleteRequest{}, fieldErr("task_id", "give a task id or a key (scope and intent id), not both")
	case req.TaskID != "":
		if _, ok := parseTaskID(req.TaskID); !ok {
			return DeleteRequest{}, fieldErr("task_id", "not a task id of this service (fake-task-0001, fake-task-0002, ...)")
		}
		return req, nil
	case req.IntentID == "":
		return DeleteRequest{}, fieldErr("intent_id", "missing; name the task by its key (scope and intent id) or by its task id")
	}
	if err := validateScope("scope", &req.Scope); err != nil {
		return DeleteRequest{}, err
	}
	if err := validateIntentID(req.IntentID); err != nil {
		return DeleteRequest{}, err
	}
	return req, nil
}

// DefaultScope is the scope of a call, a request document or a record that
// names none; the scope rules are the task-service contract's, the same
// as the task-request document's.
const DefaultScope = taskservice.DefaultScope

// MaxScopeBytes bounds a scope's length.
const MaxScopeBytes = taskservice.MaxScopeBytes

// ValidScope reports whether s may name a caller scope (taskservice.ValidScope).
func ValidScope(s string) bool { return taskservice.ValidScope(s) }

// validateScope checks a scope and sets an absent one to "default".
func validateScope(field string, scope *string) error {
	if *scope == "" {
		*scope = DefaultScope
		return nil
	}
	if !ValidScope(*scope) {
		return fieldErr(field, "%q is not a scope: 1 to %d bytes of a-z, 0-9, '-' and '_', starting with a letter or digit", *scope, MaxScopeBytes)
	}
	return nil
}

// decodeFault parses the body of a fault call strictly.
func decodeFault(data []byte) (FaultRequest, error) {
	m, err := parseBody(data)
	if err != nil {
		return FaultRequest{}, err
	}
	if err := members("", m, "drop_replies"); err != nil {
		return FaultRequest{}, err
	}
	n, err := whole("", m, "drop_replies", true)
	if err != nil {
		return FaultRequest{}, err
	}
	return FaultRequest{DropReplies: int(n)}, nil
}

// validateCreate checks a create request; the error names the field. An
// absent scope becomes "default".
func validateCreate(req *CreateRequest) error {
	if err := validateScope("scope", &req.Scope); err != nil {
		return err
	}
	if err := validateIntentID(req.IntentID); err != nil {
		return err
	}
	if req.NotAfter != "" {
		if _, err := time.Parse(time.RFC3339, req.NotAfter); err != nil {
			return fieldErr("not_after", "%q is not an RFC 3339 time", req.NotAfter)
		}
	}
	if err := validateDigest(req.RequestDigest); err != nil {
		return err
	}
	if err := validateText("request_id", req.RequestID, MaxRequestIDBytes); err != nil {
		return err
	}
	if req.CallRef != "" {
		if err := validateText("call_ref", req.CallRef, MaxRefBytes); err != nil {
			return err
		}
	}
	if strings.TrimSpace(req.Task.Title) == "" {
		return fieldErr("task.title", "missing or empty")
	}
	if err := validateText("task.title", req.Task.Title, MaxTitleBytes); err != nil {
		return err
	}
	if req.Task.AssigneePersonRef != nil {
		if err := validateRef("task.assignee_person_ref", *req.Task.AssigneePersonRef); err != nil {
			return err
		}
	}
	if req.Task.DueAt != nil {
		if err := validateRef("task.due_at", *req.Task.DueAt); err != nil {
			return err
		}
	}
	return nil
}

// validateIntentID checks an intent id: non-empty text, in Unicode
// Normalization Form C. Intent ids are compared byte for byte, so a second
// spelling of one intent (e + U+0301 for é) would create a second task; it
// is refused, not normalised, since the approved request's digest covers the
// id as written.
func validateIntentID(id string) error {
	if id == "" {
		return fieldErr("intent_id", "missing or empty")
	}
	if len(id) > MaxIntentIDBytes {
		return fieldErr("intent_id", "longer than %d bytes", MaxIntentIDBytes)
	}
	if err := validateText("intent_id", id, MaxIntentIDBytes); err != nil {
		return err
	}
	if !norm.NFC.IsNormalString(id) {
		return fieldErr("intent_id", "not in Unicode normalization form C (NFC): one intent has one spelling")
	}
	return nil
}

func validateDigest(d string) error {
	if d == "" {
		return fieldErr("request_digest", "missing or empty")
	}
	hexPart, ok := strings.CutPrefix(d, digestPrefix)
	if !ok || len(hexPart) != 64 {
		return fieldErr("request_digest", `must be "sha256:" followed by 64 lower-case hex digits`)
	}
	for i := 0; i < len(hexPart); i++ {
		c := hexPart[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fieldErr("request_digest", `must be "sha256:" followed by 64 lower-case hex digits`)
		}
	}
	return nil
}

// validateRef checks an optional reference: when present it is non-empty.
func validateRef(field, s string) error {
	if strings.TrimSpace(s) == "" {
		return fieldErr(field, "empty; use null when unknown")
	}
	return validateText(field, s, MaxRefBytes)
}

// validateText refuses oversized text, invalid UTF-8 and control characters.
func validateText(field, s string, max int) error {
	if len(s) > max {
		return fieldErr(field, "longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return fieldErr(field, "not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fieldErr(field, "contains a control character")
		}
	}
	return nil
}

// validateRecords checks a records request and returns the page size to
// use. A request for one intent id without a scope is for scope "default".
func validateRecords(req *RecordsRequest) (int, error) {
	switch req.Kind {
	case RecordRequests, RecordCreates, RecordTasks, RecordIntents, RecordDeletes:
	case "":
		return 0, fieldErr("kind", "missing; one of requests, creates, tasks, intents, deletes")
	default:
		return 0, fieldErr("kind", "unknown kind; one of requests, creates, tasks, intents, deletes")
	}
	if req.Scope != "" {
		if err := validateScope("scope", &req.Scope); err != nil {
			return 0, err
		}
	}
	if req.IntentID != "" {
		if err := validateIntentID(req.IntentID); err != nil {
			return 0, err
		}
		if err := validateScope("scope", &req.Scope); err != nil {
			return 0, err
		}
	}
	switch {
	case req.Limit < 0:
		return 0, fieldErr("limit", "negative")
	case req.Limit == 0:
		return DefaultRecordsLimit, nil
	case req.Limit > MaxRecordsLimit:
		return MaxRecordsLimit, nil
	}
	return req.Limit, nil
}
