package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
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

// decodeStrict decodes one JSON object into v, refusing unknown members and
// trailing data.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return fieldErr("body", "empty; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			return fieldErr(typeErr.Field, "must be a JSON %s, not %s", typeErr.Type.Kind(), typeErr.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return fieldErr(strings.Trim(name, `"`), "unknown member")
		default:
			return fieldErr("body", "not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fieldErr("body", "trailing data after the JSON object")
	}
	return nil
}

// decodeCreate parses and validates the body of a create call.
func decodeCreate(data []byte) (CreateRequest, error) {
	var req CreateRequest
	if err := decodeStrict(data, &req); err != nil {
		return CreateRequest{}, err
	}
	if err := validateCreate(req); err != nil {
		return CreateRequest{}, err
	}
	return req, nil
}

// validateCreate checks a create request; the error names the field.
func validateCreate(req CreateRequest) error {
	if err := validateIntentID(req.IntentID); err != nil {
		return err
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

func validateIntentID(id string) error {
	if id == "" {
		return fieldErr("intent_id", "missing or empty")
	}
	if len(id) > MaxIntentIDBytes {
		return fieldErr("intent_id", "longer than %d bytes", MaxIntentIDBytes)
	}
	return validateText("intent_id", id, MaxIntentIDBytes)
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

// validateRecords checks a records request and returns the page size to use.
func validateRecords(req RecordsRequest) (int, error) {
	switch req.Kind {
	case RecordRequests, RecordCreates, RecordTasks, RecordIntents:
	case "":
		return 0, fieldErr("kind", "missing; one of requests, creates, tasks, intents")
	default:
		return 0, fieldErr("kind", "unknown kind; one of requests, creates, tasks, intents")
	}
	if req.IntentID != "" {
		if err := validateIntentID(req.IntentID); err != nil {
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
