package taskservice

import "context"

// The abilities below are optional: an adapter implements those its
// service offers, and a caller checks for one with a type assertion
// (svc.(taskservice.Lister)). Finder and DeletedKeys, in ledger.go, are
// two more.

// Lister is implemented by an adapter that can list the tasks its service
// holds, for an audit or a demo that reads the service itself.
type Lister interface {
	ListTasks(ctx context.Context) (Listing, error)
}

// Deleter is implemented by an adapter that can delete the task of a key
// (scope, intent id) as its owner would, in the service itself.
type Deleter interface {
	DeleteTask(ctx context.Context, scope, intentID string) error
}

// Listing is what a task service shows of itself: the tasks that carry a
// key, and how many items it holds in all.
type Listing struct {
	// Name names the service ("CalDAV collection https://…/").
	Name string
	// StoreID names the scope in which the service remembers intent ids,
	// as its results name it.
	StoreID string
	// OtherStoreIDs are the stores of the service's other destinations
	// (more CalDAV collections served by the same executors), listed in
	// Tasks with it.
	OtherStoreIDs []string
	// Tasks are the tasks that carry an intent id.
	Tasks []ListedTask
	// Items counts everything the service holds, tasks of ours or not.
	Items int
	// NoCallLog says why the service has no log of calls to audit ("the
	// CalDAV server keeps no call log").
	NoCallLog string
}

// ListedTask is one task a listing shows: one that carries the key (scope,
// intent id) it was created for; no scope is the default scope.
type ListedTask struct {
	Scope         string `json:"scope,omitempty"`
	IntentID      string `json:"intent_id"`
	TaskID        string `json:"task_id"`
	RequestDigest string `json:"request_digest,omitempty"`
	// Where names the task in the service (a resource's path).
	Where string `json:"where,omitempty"`
	// Title is the task's title (a VTODO's SUMMARY, an issue's subject).
	Title string `json:"title,omitempty"`
	// Unproven, when not empty, says why this task's claim on its key is
	// not proven to be the pipeline's (no tag, a tag that does not match
	// under the mark key, an author who is not the adapter's user): a task
	// planted or edited by someone else. Empty for a proven task, and for
	// every task of an adapter given no mark key.
	Unproven string `json:"unproven,omitempty"`
}
