package caldav

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/emersion/go-ical"

	"github.com/sendtwice/sendtwice/internal/redact"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/internal/endpoint"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
)

// DefaultTimeout bounds one HTTP exchange when Config gives neither an
// HTTP client nor a timeout.
const DefaultTimeout = 30 * time.Second

// DefaultMaxConns bounds the connections open to the collection's server at
// once when Config gives neither an HTTPClient nor MaxConns. Calls beyond it
// wait for a connection (within their deadline): CalDAV servers are sized
// for people's clients, and one of them (Radicale 3.1, which serves with
// select) stops with more than about a thousand descriptors open, as an
// executor's default 512 handlers could make it.
const DefaultMaxConns = 32

// Config says where the collection is and how to log in to it.
type Config struct {
	// CollectionURL is the calendar collection that holds the tasks, for
	// example "https://dav.example.org/alice/tasks/". It must be http or
	// https, name a host, and carry no user, password, query or fragment.
	CollectionURL string
	// Username and Password are sent with HTTP basic authentication to the
	// collection's server, and nowhere else. Both empty: no authentication.
	Username string
	Password string
	// HTTPClient, when set, makes the requests (its Timeout and Transport
	// apply). The adapter uses a copy that never follows a redirect, so
	// that the credentials stay with the collection's server. Whichever
	// client makes them, requests are OpenTelemetry client spans of the
	// trace their context holds, and carry its traceparent to the server.
	HTTPClient *http.Client
	// Timeout bounds one HTTP exchange when HTTPClient is nil; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxConns bounds the connections open to the server at once when
	// HTTPClient is nil; zero means DefaultMaxConns.
	MaxConns int
	// MarkKey, when set, is the deployment's mark key (at least 32 bytes,
	// shared by its executors and never shown; New refuses a shorter one):
	// the name and the UID of every task carry a tag made with it, so that
	// a future task's cannot be guessed, and every VTODO written carries
	// PropProof; a resource without a valid proof is never taken as ours.
	// Nil: names, UIDs and answers as before mark keys.
	MarkKey []byte
}

// Adapter is a taskservice.Service over one CalDAV collection. It is safe
// for concurrent use.
type Adapter struct {
	collection *url.URL // normalized, path ends in "/"
	normalized string
	storeID    string
	user, pass string
	client     *http.Client
	markKey    []byte
}

// New checks cfg and returns an adapter for its collection. It makes no
// request; the first Create or Tasks does.
func New(cfg Config) (*Adapter, error) {
	n, err := endpoint.Parse("caldav: CollectionURL", "give them as Username and Password", cfg.CollectionURL)
	if err != nil {
		return nil, err
	}
	if strings.Contains(cfg.Username, ":") {
		return nil, errors.New("caldav: Username must not contain ':' (HTTP basic authentication cannot carry it)")
	}
	if cfg.Username == "" && cfg.Password != "" {
		return nil, errors.New("caldav: Password is set but Username is empty")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("caldav: Timeout %v is negative", cfg.Timeout)
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("caldav: MaxConns %d is negative", cfg.MaxConns)
	}
	if err := proof.CheckKey(cfg.MarkKey); err != nil {
		return nil, fmt.Errorf("caldav: MarkKey: %w", err)
	}
	client := endpoint.Client(cfg.HTTPClient, cfg.Timeout, DefaultTimeout, cfg.MaxConns, DefaultMaxConns)

	sum := sha256.Sum256([]byte(n.String()))
	return &Adapter{
		collection: n,
		normalized: n.String(),
		storeID:    "caldav-" + hex.EncodeToString(sum[:])[:16],
		user:       cfg.Username,
		pass:       cfg.Password,
		client:     client,
		markKey:    bytes.Clone(cfg.MarkKey),
	}, nil
}

// StoreID names the scope in which intent ids are remembered: "caldav-"
// and the first 16 hexadecimal digits of the SHA-256 of the normalized
// collection URL. Every Result carries it.
func (a *Adapter) StoreID() string { return a.storeID }

// Scope says in words where keys are remembered: each caller scope, in "the collection"
// and its normalized URL.
func (a *Adapter) Scope() string { return "each caller scope, in the collection " + a.normalized }

// CollectionURL is the normalized collection URL (it ends in "/").
func (a *Adapter) CollectionURL() string { return a.normalized }

// resourceURL is the URL of the resource of (scope, intentID): named by
// ResourceNameOf.
func (a *Adapter) resourceURL(scope, intentID string) (*url.URL, error) {
	name, err := a.ResourceNameOf(scope, intentID)
	if err != nil {
		return nil, err
	}
	return a.urlOf(name), nil
}

// urlOf is the URL of the resource name in the collection.
func (a *Adapter) urlOf(name string) *url.URL {
	u := *a.collection
	u.Path += name
	return &u
}

// The properties the adapter writes into every VTODO it creates. The intent
// and digest properties mark a resource as one of ours; the others are kept
// for audits.
const (
	PropIntentID      = "X-SENDTWICE-INTENT-ID"
	PropScope         = "X-SENDTWICE-SCOPE"
	PropRequestDigest = "X-SENDTWICE-REQUEST-DIGEST"
	PropRequestID     = "X-SENDTWICE-REQUEST-ID"
	PropCandidateID   = "X-SENDTWICE-CANDIDATE-ID"
	PropSourceVersion = "X-SENDTWICE-SOURCE-VERSION"
	PropApprovedBy    = "X-SENDTWICE-APPROVED-BY"
	PropAssigneeRef   = "X-SENDTWICE-ASSIGNEE-REF"
	PropCallRef       = "X-SENDTWICE-CALL-REF"
)

const productID = "-//sendtwice//CalDAV task adapter//EN"

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Create creates the task of req as one VTODO resource, named after the
// key (ResourceNameOf), with a PUT that only succeeds when no resource has
// that name (If-None-Match: *). When one has, it reads it back and answers
// Replayed (our resource, the same request digest) or Conflict (another
// digest, or a resource that is not ours, said in Result.Reason). The
// TaskID is the VTODO's UID, which for a resource made here is
// TaskIDOf(scope, intent id).
func (a *Adapter) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	target, err := a.resourceURL(req.KeyScope(), req.IntentID)
	if err != nil {
		return taskservice.Result{}, taskservice.Permanent(err)
	}
	uid := a.TaskIDOf(req.KeyScope(), req.IntentID)
	body, err := encodeTask(req, uid, a.proofOf(req.KeyScope(), req.IntentID, req.RequestDigest, uid), time.Now())
	if err != nil {
		return taskservice.Result{}, taskservice.Permanent(err)
	}
	resp, err := a.send(ctx, http.MethodPut, target, body, "Content-Type", calendarType, "If-None-Match", "*")
	if err != nil {
		return taskservice.Result{}, err
	}
	answerBody, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	drain(resp)
	switch resp.StatusCode {
	case http.StatusCreated, http.StatusNoContent, http.StatusOK:
		// With If-None-Match: * a success means there was no resource.
		return taskservice.Result{Outcome: taskservice.Created, TaskID: uid, StoreID: a.storeID}, nil
	case http.StatusPreconditionFailed:
		return a.readBack(ctx, req, target)
	case http.StatusConflict, http.StatusMultiStatus, http.StatusForbidden:
		// Radicale answers a UID another resource holds with 409 and
		// Xandikos with a 207 holding a 412, each naming the CalDAV
		// precondition no-uid-conflict (RFC 4791 §5.3.2.1), which RFC 4791
		// itself answers with 403.
		if hasUIDConflict(answerBody) {
			return taskservice.Result{}, taskservice.Permanent(taskservice.NotCreated(fmt.Errorf(
				"%w: PUT %s answered %s (no-uid-conflict): the collection already holds a resource under another name with the UID %q that this task would have (a calendar client may have copied or moved the task there); this call created nothing (a task made by an earlier call for this intent may be that resource), and a resend is refused the same way until that resource is removed",
				ErrUIDClash, target, resp.Status, uid)))
		}
	}
	return taskservice.Result{}, a.statusError("PUT", target, resp, true)
}

// maxErrorBodyBytes bounds how much of a refusal's body is read.
const maxErrorBodyBytes = 64 << 10

// hasUIDConflict reports whether an answer's XML body names the CalDAV
// precondition no-uid-conflict.
func hasUIDConflict(body []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Space == nsCalDAV && se.Name.Local == "no-uid-conflict" {
			return true
		}
	}
}

// The true reasons of a create that is refused, each a permanent error
// marked taskservice.NotCreated that wraps one of these.
var (
	// ErrUIDClash: the server refused the PUT because another resource in
	// the collection holds the UID of the task (no-uid-conflict).
	ErrUIDClash = errors.New("caldav: another resource in the collection holds the task's UID")
	// ErrNotOurs: the resource at the key's name was not made by this
	// adapter (no X-SENDTWICE-* marks, and not the key's UID).
	ErrNotOurs = errors.New("caldav: the resource at the intent's name was not created by this adapter")
	// ErrMarksRemoved: the resource at the key's name holds the key's
	// task (its UID, or its intent id), but without the request digest
	// this adapter writes: a client rewrote it and dropped the marks, so
	// whether it holds this request's content cannot be told.
	ErrMarksRemoved = errors.New("caldav: the task at the intent's name lost the X-SENDTWICE-* properties this adapter wrote")
)

// readBack answers a PUT that found the name taken.
func (a *Adapter) readBack(ctx context.Context, req taskservice.Request, target *url.URL) (taskservice.Result, error) {
	cal, resp, err := a.get(ctx, target)
	if err != nil {
		return taskservice.Result{}, err
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		// Taken at the PUT, gone at the GET: deleted in between. A retry
		// finds out what is there now.
		return taskservice.Result{}, taskservice.Transient(fmt.Errorf("caldav: PUT %s answered 412 (exists), then GET answered %s: the resource was removed in between", target, resp.Status))
	}
	if resp.StatusCode != http.StatusOK {
		return taskservice.Result{}, a.statusError("GET", target, resp, false)
	}
	return a.answer(req, target, cal, false)
}

// RemembersDeletedKeys is false: the key is the resource, and a PUT with
// If-None-Match: * succeeds again once the resource is deleted. The
// executor keeps the keys in its intent ledger (taskservice.KeepDeletedKeys).
func (a *Adapter) RemembersDeletedKeys() bool { return false }

// Find reads the resource of req's key, creating nothing: absent (404 or
// 410) → found false; present → the answer Create would give a resend of
// req (Replayed for our resource with req's digest, else Conflict). With a
// mark key, a key whose tagged name is absent is looked up under its name
// of before the key (see locate).
func (a *Adapter) Find(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
	none := taskservice.Result{StoreID: a.storeID}
	at, err := a.locate(ctx, req.KeyScope(), req.IntentID)
	if err != nil || at.cal == nil {
		return none, false, err
	}
	res, err := a.answer(req, at.target, at.cal, at.legacy)
	if err != nil {
		return none, false, err
	}
	return res, true, nil
}

var (
	_ taskservice.DeletedKeys = (*Adapter)(nil)
	_ taskservice.Finder      = (*Adapter)(nil)
)

// answer says what a resource found at req's name means for req: our
// resource with req's digest → Replayed; with another digest, or of
// another intent or scope → Conflict; a resource not ours (ErrNotOurs),
// ours without its marks (ErrMarksRemoved) or, with a mark key, without a
// valid proof (ErrUnproven; legacy: found at the name of before the key)
// → a permanent error marked taskservice.NotCreated.
func (a *Adapter) answer(req taskservice.Request, target *url.URL, cal *ical.Calendar, legacy bool) (taskservice.Result, error) {
	res := taskservice.Result{Outcome: taskservice.Conflict, StoreID: a.storeID, TaskID: target.Path}
	todo := findTodo(cal)
	if todo == nil {
		return taskservice.Result{}, taskservice.Permanent(taskservice.NotCreated(fmt.Errorf(
			"%w: %s holds no task (no VTODO with a UID); this call created nothing and the resource is left as it is: remove it, or send the request under another intent id",
			ErrNotOurs, target)))
	}
	uid := propText(todo, ical.PropUID)
	res.TaskID = uid
	digest := propText(todo, PropRequestDigest)
	intent := propText(todo, PropIntentID)
	switch {
	case digest == "" && (uid == a.TaskIDOf(req.KeyScope(), req.IntentID) || uid == TaskID(req.KeyScope(), req.IntentID) || intent == req.IntentID):
		return taskservice.Result{}, taskservice.Permanent(taskservice.NotCreated(fmt.Errorf(
			"%w: %s holds the task with this intent's UID %q but without %s (a calendar client rewrote it and dropped the marks), so whether it was made from this request cannot be told; this call created nothing and the task is left as it is",
			ErrMarksRemoved, target, uid, PropRequestDigest)))
	case digest == "":
		return taskservice.Result{}, taskservice.Permanent(taskservice.NotCreated(fmt.Errorf(
			"%w: %s holds a task with the UID %q and no %s property; this call created nothing and the resource is left as it is: remove it, or send the request under another intent id",
			ErrNotOurs, target, uid, PropRequestDigest)))
	}
	if why := a.unproven(todo); why != "" {
		return taskservice.Result{}, unprovenError(target, todo, why, legacy)
	}
	switch {
	case intent != req.IntentID:
		res.Reason = fmt.Sprintf("the resource %s that holds this intent's name belongs to intent %q", target.Path, intent)
	case todoScope(todo) != req.KeyScope():
		res.Reason = fmt.Sprintf("the resource %s that holds this intent's name belongs to scope %q", target.Path, todoScope(todo))
	case digest == req.RequestDigest:
		res.Outcome = taskservice.Replayed
	}
	return res, nil
}

// TaskID is the task id (the VTODO's UID) of (scope, intentID) without a
// mark key (with one, TaskIDOf adds the tag): the intent id in the default
// scope, as before scopes; in another scope, the scope, "~~" and the
// intent id, as its resource is named. A task id holds no space: the
// receipt that names it is a document, whose ids refuse one.
func TaskID(scope, intentID string) string {
	if scope == "" || scope == taskservice.DefaultScope {
		return intentID
	}
	return scope + scopeSeparator + intentID
}

// todoScope is the scope a VTODO of ours names; one made before scopes
// names none and is in the default scope.
func todoScope(todo *ical.Component) string {
	if s := propText(todo, PropScope); s != "" {
		return s
	}
	return taskservice.DefaultScope
}

// Delete removes the task of intentID in the default scope (DeleteTask).
func (a *Adapter) Delete(ctx context.Context, intentID string) error {
	return a.DeleteTask(ctx, taskservice.DefaultScope, intentID)
}

// DeleteTask removes the task of (scope, intentID), as its owner would in
// their task list, and only when the resource at its name (found as Find
// finds it) is one of ours for that key, with a valid proof under a mark
// key (the GET and the DELETE are tied by the ETag, so a resource replaced
// in between is not removed). A missing task is an error wrapping
// ErrNoTask.
func (a *Adapter) DeleteTask(ctx context.Context, scope, intentID string) error {
	scope = keyScope(scope)
	at, err := a.locate(ctx, scope, intentID)
	if err != nil {
		return err
	}
	target := at.target
	if at.cal == nil {
		return taskservice.Permanent(fmt.Errorf("caldav: DELETE %s: %w", target, ErrNoTask))
	}
	todo := findTodo(at.cal)
	if todo == nil || propText(todo, PropIntentID) != intentID || todoScope(todo) != scope || propText(todo, PropRequestDigest) == "" || a.unproven(todo) != "" {
		return taskservice.Permanent(fmt.Errorf("caldav: DELETE %s: the resource was not created by this adapter for intent %q in scope %q; left as it is", target, intentID, scope))
	}
	status, err := a.sendIfMatch(ctx, http.MethodDelete, target, at.etag, nil)
	if status == http.StatusNotFound || status == http.StatusGone {
		return taskservice.Permanent(fmt.Errorf("caldav: DELETE %s: %w", target, ErrNoTask))
	}
	return err
}

// ErrNoTask is wrapped by Delete when the intent has no task.
var ErrNoTask = errors.New("caldav: no task for this intent")

// do sends req with the credentials. Requests go only to the collection's
// origin: every URL is built from it and redirects are not followed.
func (a *Adapter) do(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != a.collection.Scheme || !strings.EqualFold(req.URL.Host, a.collection.Host) {
		return nil, fmt.Errorf("caldav: refusing a request to %s://%s, which is not the collection's server", req.URL.Scheme, req.URL.Host)
	}
	if a.user != "" {
		req.SetBasicAuth(a.user, a.pass)
	}
	return a.client.Do(req)
}

// calendarType is the Content-Type of a resource the adapter writes.
const calendarType = "text/calendar; charset=utf-8"

// send sends one request to target with body and the headers given as
// name and value pairs (an empty value sets none). A request not sent, or
// whose answer did not arrive, is a transient error: it may have reached
// the server.
func (a *Adapter) send(ctx context.Context, method string, target *url.URL, body []byte, header ...string) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, taskservice.Permanent(fmt.Errorf("caldav: %s: %w", method, err))
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			hreq.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := a.do(hreq)
	if err != nil {
		return nil, taskservice.Transient(fmt.Errorf("caldav: %s %s: %w", method, target, err))
	}
	return resp, nil
}

// sendIfMatch sends method to target with body (a calendar), only if the
// resource's ETag is still etag (none: unconditionally). A 2xx answer is
// status 0 and no error; another is its status and statusError's error,
// for the caller to refine; a request not answered, status 0 and a
// transient error.
func (a *Adapter) sendIfMatch(ctx context.Context, method string, target *url.URL, etag string, body []byte) (status int, err error) {
	contentType := ""
	if body != nil {
		contentType = calendarType
	}
	resp, err := a.send(ctx, method, target, body, "If-Match", etag, "Content-Type", contentType)
	if err != nil {
		return 0, err
	}
	drain(resp)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return 0, nil
	}
	return resp.StatusCode, a.statusError(method, target, resp, false)
}

// get fetches and decodes target. A non-200 answer is returned with a nil
// calendar and its body drained; err is a classified transport or decode
// failure.
func (a *Adapter) get(ctx context.Context, target *url.URL) (*ical.Calendar, *http.Response, error) {
	resp, err := a.send(ctx, http.MethodGet, target, nil, "Accept", ical.MIMEType)
	if err != nil {
		return nil, nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return nil, resp, nil
	}
	cal, err := ical.NewDecoder(io.LimitReader(resp.Body, maxResourceBytes)).Decode()
	if err != nil {
		// A body cut short by a lost connection reads as a decode error
		// too; reading again is harmless.
		return nil, nil, taskservice.Transient(fmt.Errorf("caldav: GET %s: decoding the resource: %w", target, err))
	}
	return cal, resp, nil
}

const maxResourceBytes = 1 << 20

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResourceBytes))
	resp.Body.Close()
}

// statusError classifies an unexpected answer. 5xx, 408 and 429 are
// transient; everything else (401, 403, a missing collection, a redirect)
// is permanent. The message names the method, the URL and the status, and
// never the password, nor a query or user information of a redirect's
// target.
func (a *Adapter) statusError(method string, target *url.URL, resp *http.Response, put bool) error {
	msg := fmt.Sprintf("caldav: %s %s: the server answered %s", method, target, resp.Status)
	switch code := resp.StatusCode; {
	case transientStatus(code):
		return taskservice.Transient(errors.New(msg))
	case code == http.StatusUnauthorized:
		msg += fmt.Sprintf(": the credentials of user %q were refused", a.user)
	case code == http.StatusForbidden:
		msg += fmt.Sprintf(": user %q may not write to %s", a.user, a.normalized)
	case put && (code == http.StatusNotFound || code == http.StatusConflict || code == http.StatusGone):
		msg += fmt.Sprintf(": the collection %s does not exist", a.normalized)
	case code >= 300 && code < 400:
		msg += fmt.Sprintf(" with a redirect to %q, which is not followed: configure the collection's own URL", redact.URL(resp.Header.Get("Location")))
	}
	return taskservice.Permanent(errors.New(msg))
}

// transientStatus reports whether an answer's status says to try again
// later: a 5xx, 408 or 429.
func transientStatus(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

func findTodo(cal *ical.Calendar) *ical.Component {
	if cal == nil {
		return nil
	}
	for _, c := range cal.Children {
		if c.Name == ical.CompToDo && c.Props.Get(ical.PropUID) != nil {
			return c
		}
	}
	return nil
}
