package servicetest

import (
	"context"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// Prefix starts every intent id the rows make: "probe-<run id>-<row>".
const Prefix = "probe-"

// Scope is the caller scope of every call the rows make, and TitlePrefix
// starts every title: their tasks are told apart from a pipeline's.
const (
	Scope       = "sendtwice-probe"
	TitlePrefix = "[sendtwice probe] "
)

// Defaults of Options.
const (
	DefaultConcurrency   = 16
	DefaultCallTimeout   = 10 * time.Second
	DefaultLostReplyWait = 2 * time.Second
	DefaultRetries       = 3
	DefaultRetryDelay    = 200 * time.Millisecond
	// MaxConcurrency bounds Options.Concurrency: the rows are a short
	// experiment, not a load test.
	MaxConcurrency = 256
)

// Target is an implementation of the contract, with the hooks the rows
// need beyond it. Only Service is required; a row whose hook is nil is
// unknown (or not applicable), and Run skips it.
type Target struct {
	// Name names the service ("fake task service").
	Name string
	// Service is the service, reached through the public contract only.
	Service taskservice.Service
	// Scope says in what scope the service remembers keys ("the service",
	// "the collection"), as the adapter states it; empty when it cannot
	// say.
	Scope string
	// Class states how the service keeps a resend to one task, in words,
	// for a report ("keeps keys"); empty when it cannot say.
	Class string
	// Delete deletes the task of one key (scope, intent id), as a user
	// would in the service's own interface; nil when the target cannot.
	// The rows call it only with intent ids they made.
	Delete func(ctx context.Context, scope, intentID string) error
	// NeverDeletes states that the service has no way to delete a task, so
	// that a key lasts as long as the service's store. It answers the
	// "key remembered after the task is deleted" row when Delete is nil.
	NeverDeletes bool
	// LoseReply arranges that the reply to the next create call is lost
	// after the service has acted on it (a fault switch, a proxy that
	// drops the response); disarm undoes it if the call did not use it
	// up. Nil when the target cannot lose a reply.
	LoseReply func(ctx context.Context) (disarm func(context.Context) error, err error)
	// LoseReplyHow says how the reply is lost, for the row's method ("the
	// service withholds the reply after commit"); empty for a generic one.
	LoseReplyHow string
	// Count returns how many tasks exist for an intent id (in any scope),
	// counted by the service; nil when the target cannot list its tasks.
	Count func(ctx context.Context, intentID string) (int, error)
	// Naive creates a task on every call, with no lookup and no lock: what
	// a plain retry does to the service without the adapter's protocol.
	// Nil when the target offers no such create; NaiveWhyNot then says
	// why, for the row.
	Naive       taskservice.Service
	NaiveWhyNot string
	// Find looks the key of a request up, creating nothing
	// (taskservice.Finder's Find), for an adapter that decides a create by
	// a lookup. Nil when no lookup decides a create; FindWhyNot then says
	// why, for the row.
	Find       func(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error)
	FindWhyNot string
	// Restart stops the service and starts it again on the same store,
	// as a crash and a restart would, and returns the service to call
	// from then on (the same one if it is unchanged); nil when the target
	// cannot restart.
	Restart func(ctx context.Context) (taskservice.Service, error)
	// Document completes a request the rows made (key, request id, title,
	// candidate) with the request document it is for and its digest, and
	// with whatever else the service routes or checks by (a provider, a
	// destination). Nil gives a JSON document of the key and the content,
	// whose digest is the SHA-256 of its bytes.
	Document func(req taskservice.Request) taskservice.Request
}

// Options tune the rows; the zero value takes every default.
type Options struct {
	// Concurrency is the number of calls sent at once with one key
	// (DefaultConcurrency; 2 to MaxConcurrency).
	Concurrency int
	// RunID makes the intent ids unique; empty picks a random one. It is
	// lower-case letters and digits only.
	RunID string
	// CallTimeout bounds each call (DefaultCallTimeout).
	CallTimeout time.Duration
	// LostReplyWait is how long the call whose reply is lost waits for it
	// (DefaultLostReplyWait).
	LostReplyWait time.Duration
	// Retries is how many times a call that failed transiently is retried,
	// as a redelivery would (DefaultRetries; -1 for none).
	Retries int
	// RetryDelay is the pause before each retry (DefaultRetryDelay).
	RetryDelay time.Duration
	// NotAfter is the expiry every call carries, as an approval's would
	// (zero: ApprovalLifetime after NewRows).
	NotAfter time.Time
}

// Row ids, in the order of a report.
const (
	RowRetry       = "retry"
	RowConflict    = "conflict"
	RowConcurrent  = "concurrent"
	RowLostReply   = "lost_reply"
	RowAfterDelete = "after_delete"
	RowScope       = "scope"
	// RowReadAfterWrite: a create, then at once a lookup of its key.
	RowReadAfterWrite = "read_after_write"
	// RowNaive: two plain creates with one key, without the adapter's
	// protocol, for comparison; never judged.
	RowNaive = "naive_retry"
	// RowOtherIntent: another intent id with the same content creates a
	// task of its own.
	RowOtherIntent = "other_intent"
	// RowScopesApart: one intent id in two scopes is two keys.
	RowScopesApart = "scopes_apart"
	// RowRestart: a key is remembered across a restart of the service.
	RowRestart = "restart"
)

// allRows are the ids of every row, in the order Run runs them.
var allRows = []string{RowRetry, RowConflict, RowOtherIntent, RowConcurrent, RowLostReply, RowAfterDelete,
	RowScopesApart, RowRestart, RowReadAfterWrite, RowNaive, RowScope}

// Status is a row's judgement.
type Status string

// Statuses of a row.
const (
	// Safe: what was seen keeps at-least-once delivery from doing anything twice.
	Safe Status = "safe"
	// Caveat: safe for at-least-once delivery, with a limit the user should
	// know (a deleted task comes back on a late resend).
	Caveat Status = "caveat"
	// Unsafe: what was seen makes a resend do something twice or wrong.
	Unsafe Status = "unsafe"
	// Unknown: the row could not be measured for this target.
	Unknown Status = "unknown"
	// Info: measured for comparison, not judged (what a plain retry does
	// without the adapter's protocol).
	Info Status = "info"
	// NotApplicable: the question does not arise for this target (its
	// Seen says why).
	NotApplicable Status = "n/a"
)

// Row is one question and its answer.
type Row struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	// Method says how the row was measured.
	Method string `json:"how_measured"`
	// Answer is the short answer for a table ("first result").
	Answer string `json:"answer"`
	// Seen is what the calls returned, with task ids.
	Seen   string `json:"seen"`
	Status Status `json:"status"`
	// Consequence says, for an unsafe or caveat row, what it means for a
	// resend; Fix what would cure it.
	Consequence string `json:"consequence,omitempty"`
	Fix         string `json:"fix,omitempty"`
	// IntentID is the intent id the row used, if any.
	IntentID string `json:"intent_id,omitempty"`
}

// CountListed is a Target.Count for a service whose adapter lists its
// tasks: the listed tasks that carry intentID, in any scope.
func CountListed(l taskservice.Lister) func(ctx context.Context, intentID string) (int, error) {
	return func(ctx context.Context, intentID string) (int, error) {
		listing, err := l.ListTasks(ctx)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, t := range listing.Tasks {
			if t.IntentID == intentID {
				n++
			}
		}
		return n, nil
	}
}
