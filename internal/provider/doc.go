// Package provider is the fake task service: a stand-in for an external task
// system that makes retried calls safe to study. It is a NATS service (the
// micro framework, service name "fake-task-provider") over a Pebble database,
// and the package also holds the Client that callers use to reach it.
//
// # What it does
//
// A create call is keyed by a key, the pair of the caller's scope (a team,
// tenant or account: CreateRequest.Scope, one subject token, "default"
// when absent) and the caller-supplied intent id, as a unique constraint
// over both would be in a database; its content is compared by the
// request digest:
//
//   - a key never seen before: one task is created, and the digest and the
//     result are stored under the key (outcome "created");
//   - a key seen before with the same digest: nothing is created and the
//     first result, with the same task id, is returned ("replayed");
//   - a key seen before with a different digest: nothing is created,
//     nothing is overwritten, and the reply says so ("idempotency_conflict").
//
// Two scopes that use one intent id get two tasks, and a replay never
// answers with another scope's task. A different intent id with the same
// content creates a second task: only the caller knows whether it meant a
// retry or a second task.
//
// # Deleted tasks: the key outlives the task
//
// The delete endpoint (Client.Delete, the provider delete command) deletes
// a task the way its owner deletes it in their list, named by its key or
// its task id: tasks existing goes down by one (in total and in its scope),
// the task record is removed, a delete record is kept, and the key stays,
// marked deleted (FirstResult.TaskDeleted). A resend of the approval is
// then answered "replayed" with the first task id and task_deleted set
// (CreateResponse.TaskDeleted, taskservice.Result.TaskDeleted): the
// request is counted, nothing is created. Deleting an unknown task ("404",
// ErrUnknownTask) or one already deleted ("409", ErrTaskDeleted) changes
// nothing. A delete goes through the writer, so it is ordered with the
// creates.
//
// # Key lifetime and compaction
//
// A create call carries the not_after of the approval behind it
// (CreateRequest.NotAfter; absent for an approval that never expires). The
// gate passes an approval only while the executor's clock is at or before
// its not_after, and an executor's clock may run behind the service's by
// up to the clock allowance (Options.KeyClockAllowance, default 5m, the
// gate's own clock skew). So each key keeps keep_until, the latest
// not_after of every approval the service has seen for it (the one that
// created it, and every later one that replayed it or conflicted with it)
// plus the allowance plus a margin (Options.KeyMargin, default 1h, for
// calls in flight). A key for which an approval without expiry was seen is
// kept forever. Before keep_until no resend of any approval seen for the
// key can pass the gate unseen by the key; after it, the key may be
// compacted: it is then forgotten, and an approval the service never saw
// before the key was compacted (one made later for an old intent id) is
// treated as new, as any system treats a key after its window. A call for
// a key the service does not know whose own deadline has already passed
// by the service's clock (a caller whose clock runs behind by more than
// the allowance, a call delayed beyond the margin) is refused at
// CheckKeyDeadline, recorded, and creates nothing: its key would be
// compacted at once and a resend could create again.
//
// Compaction runs in the background every Options.CompactEvery (and on
// Store.Compact) in bounded chunks (Options.CompactChunk), each one op of
// the writer between the groups of creates: it reads an expiry index
// ("e" <keep_until> <key>) up to now and checks every entry against the
// key as its group left it, so that a replay decided just before it that
// extended the key keeps it. It removes the key's intent record and its
// expiry and order entries, never a task, a delete record or a counter;
// the per-key index entries of request, create and task records go with
// those records (records retention), not with the key.
//
// The stats reply states the allowance, the margin and the records
// retention (Info.Lifetime), so that an audit can tell a key or a record
// removed on time from one removed too early.
//
// Request and create records have a retention of their own
// (Options.RecordsRetention, default forever): records older than it are
// removed in the same chunks, with their index entries. Once they are
// gone an audit can still check the counters against each other (creates
// executed = tasks existing + tasks deleted, as compaction never removes a
// task), every task and delete record against its key while the key lives
// (one task per live key), and the records still kept; it can no longer
// match a retired request to its receipt, nor see from the create records
// that a key was created twice (the task records and the counters still
// show it).
//
// # It creates only what the request says
//
// A digest alone does not say what to create: a caller with create rights
// could name an approved intent id and request digest and ask for a task of
// its own. So every create call carries the task-request.v1 document its
// digest was computed over (CreateRequest.Request; the executor sends the
// request its approval covers). Before anything is decided, the service
// recomputes the digest from that document ("sha256:" over its RFC 8785
// form, with internal/canon) and refuses the call, naming the check and the
// field, when
//
//   - the call carries no request, or one that is not a task-request.v1
//     object with exactly its members, each of its type (check
//     "request_format");
//   - the request does not hash to the call's request_digest
//     ("request_digest");
//   - the call's scope (absent: "default") differs from the request's
//     scope (absent: "default"), or its intent_id, request_id (when
//     given) or task (title,
//     assignee, due date) differs from the request's, or the request does
//     not ask this service ("fake-task-provider.v1") to "create_task"
//     ("request_binding").
//
// A refused call creates nothing, replays nothing and binds nothing to its
// intent id: the approved call for that intent id is still created, with
// the request's task. It is answered with a "400" error reply that names
// the check and the field and the request record that keeps it.
//
// # What it keeps
//
// Five records, each in its own key space and each answering one audit
// question: every request received (did the retry arrive?), every create
// executed (was anything created again?), the tasks that exist (how many
// now?), every task deleted by its owner (why is one gone?), and per key
// the first digest and result (what did the replay return?), with its
// keep_until and deleted mark. Every record names its scope (a record
// written before scopes is in "default"); the records endpoint reads them
// by sequence, for one scope, or for one key. Three counters,
// requests_received, creates_executed and tasks_existing, are stored
// beside them, in total and per scope, with the keys live and compacted
// and the tasks deleted, and survive restarts; the stats endpoint gives
// them all (Info). A store written before scopes (layout version 1) is
// moved into the layout with scopes when it is opened, its keys into
// "default". Task ids are
// fake-task-0001, fake-task-0002, ... (four digits, wider past 9999) and are
// never reused, across restarts too.
//
// # How it stays exact
//
// All writes go through one writer goroutine. It takes every create call
// waiting at that moment (up to a bound), decides them in arrival order using
// point reads of the intent records plus the keys decided earlier in the
// same group (deletes and chunks of compaction are ops of the same writer), and commits all of their records and the counters as one Pebble
// batch with pebble.Sync before any of them is answered. A batch is applied
// whole or not at all, so a crash never leaves half of a request behind, and
// because one goroutine decides every call, any number of concurrent calls
// with one intent id yield exactly one "created". Each call costs point reads
// only; nothing scans or rewrites the whole state.
//
// # What is a request received
//
// A call that is not a well-formed create call (a body that is not strict
// JSON, unknown members, a missing or malformed intent id or one not in Unicode
// NFC (a second spelling of one intent would be a second key), a request digest
// that is not "sha256:" and 64 lower-case hex digits, an empty or oversized
// title) is refused with a "400" error reply naming the field. It is not a
// request received: it is not recorded, creates nothing and moves no
// counter, because it carries no intent the service could act on, and
// counting it would let garbage on the subject inflate the figure that
// audits compare with the number of sends. (The request document travels
// inside the body, so a request that is not strict JSON makes the body not
// strict JSON: such a call is not recorded either.)
//
// A well-formed call refused because its request does not back it (above)
// is a request received: it names an intent id and a digest, and someone
// with create rights sent it. It is recorded with outcome "refused" and its
// Refusal (check, field, reason), counted in requests_received, and nothing
// else is written; the audit reports every such record.
// Store failures are answered with "500"; nothing of such a call is
// committed. (A failure to write Pebble's log is not answered at all: Pebble
// treats it as fatal and the process ends; see Store.commitGroup.)
//
// # Which store answered
//
// A store gets a random id ("store-" and 16 hex digits) when it is created,
// kept in its meta record (a store made before ids existed gets one when it
// is next opened). Every create reply carries it (CreateResponse.StoreID), as
// do the stats reply (Client.Info), the micro service's metadata, and, through
// the executor, every receipt. Opening a new, empty store is logged at WARN
// with its absolute path: a relative data directory opened from another
// working directory is a new, empty store.
//
// # One store for the life of a deployment, one instance at a time
//
// Exactly one store serves a deployment, so that two stores never both
// answer (each would create its own fake-task-0001 for the same intent),
// and not one after the other either: a new, empty store taking over would
// create again every intent the old one knew. The store a deployment uses
// is recorded without a TTL, as the key "adopted" in the JetStream
// key-value bucket "fake-task-provider-store" (AdoptionBucket: its own
// bucket, since the lease bucket's TTL is bucket-wide; no MaxAge; the last
// records kept as history; replicated like the lease), with where, when and
// how it was adopted (Adoption). The first start on a deployment without a
// record adopts its store, once it holds the lease, and logs it at WARN.
// Every start of another store is then refused, naming the adopted store
// and what to do (*AdoptionError, ErrNotAdopted), whether or not the
// adopted store's instance is alive; the record is read before the lease,
// so a refused store never touches it. Replacing the adopted store is an
// operator's act: Adopt (the provider adopt command) must name the store it
// replaces, refuses while an instance answers or holds the lease, and says
// that every intent the replaced store knew is created again when resent
// (ServiceConfig.Replaces is the same act at a start, for the processes
// that host the service themselves, such as the demo).
// A start of the adopted store, or of a copy of its data directory (same
// store id), is not affected. A serving instance reads the record before
// every renewal of its lease: if another store was adopted it stops at once
// (ErrStoreReplaced) and releases its lease; if the record is gone it
// writes it again.
//
// Before it joins, Serve also pings the service's instances and takes a
// lease, the key "lease" in the JetStream key-value bucket
// "fake-task-provider-lease" (entries expire after the bucket's TTL,
// DefaultLeaseTTL when Serve creates it). It refuses to start, naming the
// other instance, while another instance answers the ping or an instance of
// another store holds the lease. An instance of the same store takes the
// lease over at once: Pebble's lock lets only one process open a store, so
// the holder must be a process that ended, perhaps killed before it could
// release the lease. The serving instance renews the lease every TTL/3 at
// the revision it last wrote, answers creates only while its last renewal
// is less than the TTL (less a tenth) old and not older than its
// connection's last reconnect (503 otherwise, which callers retry), stops
// serving loudly when it finds another holder (Service.Done), and deletes
// the lease on Stop.
//
// # Stats
//
// The micro STATS of the create endpoint time only its handler, which hands
// the call to the writer and returns before the commit, so that calls
// arriving together are committed together. The endpoint's "data" holds the
// figures as callers see them (CreateStats): the time from a call's arrival
// to its answer after the commit, and every error answer, store failures
// included.
//
// # Faults
//
// A service started with faults allowed has a "fault" endpoint that withholds
// the replies of the next n create calls after their effect is committed, so
// that a caller sees the classic lost reply. Such requests are recorded with
// reply_dropped set. Apart from that switch every call gets a reply.
//
// # Traces
//
// With tracing on (package internal/tracing), every call of the Client is a
// client span "request <subject>" whose trace context the request carries
// in its NATS headers, and the service continues a create's trace as the
// server span "provider create" (intent id, scope, outcome, task id) with a
// child "commit" that lasts from the call's hand-over to the writer until
// its group is committed. With tracing off, the request carries no header
// and neither side starts a span.
//
// # What it must never do
//
//   - Be reached by a function call from the executor: the executor talks to
//     it only over NATS through Client, as it would to an external system.
//     Store is opened and served only by the processes that host the
//     service, through Host (which opens, serves, and stops in the order
//     that loses no reply): the provider command, internal/embedded (the
//     executor's --embedded mode, the demo and the test environment) and
//     the bench's own instance. Those may read its id and counters
//     (Store.ID, Store.Stats) for logs and metrics; its Create and Records
//     are for this package and tests, and every other caller goes through
//     the service over NATS.
//   - Create a second task for a key it keeps, overwrite the first result
//     of a key (only its keep_until grows and its deleted mark is set), or
//     forget a key while an approval it has seen for it can still pass the
//     gate. Delete a task on its own: only its owner's delete does. Serve a store other than the one the
//     deployment adopted, or replace the adopted store on its own: only
//     Adopt does (or Serve with ServiceConfig.Replaces, the same act for a
//     process that hosts the service), when the store it replaces is named. (Options.UnsafeCreateEveryCall breaks this
//     on purpose, for tests that must show the audit failing; it is logged
//     loudly and never used by the commands.)
//   - Answer a create before its effect is durable, or count a request whose
//     effect was not committed.
//   - Reuse a task id, or let a counter disagree with its records.
//   - Create a task other than the one its request document holds, or act
//     on a request that does not hash to the call's digest.
//   - Guess a person or a date: unknown assignee and due date stay null.
//   - Import anything the gate reads documents with (it must never import
//     internal/document, internal/gate or internal/sign): it knows a create call's
//     fields (scope, intent id, request digest, task, not_after) and the
//     members of the
//     request document it compares them with, read with its own strict
//     parser, never the rest of the documents or the approval that allowed
//     the call.
//
// # Where each concept lives
//
// One file per concept; a maintainer changing one looks in one place:
//
//   - store.go: Options, the Store, Open (which migrates and gives the
//     store its id), Close and the counters read without the writer
//     (Stats, KeyStats); Pebble's settings and logger.
//   - layout.go: the key layout (one prefix per record kind, the key
//     (scope, intent id) as <scope> 0x00 <intent id>), the meta record,
//     keep_until, task ids and store ids as stored. A change of layout is
//     a new layout version in metaFormat and a migration in migrate.go,
//     or a reading of the old one (layout 2, whose per-key index entries
//     were all written, is read as layout 3 is).
//   - migrate.go: the migration from layout version 1 (before scopes),
//     finished at the next Open if cut short.
//   - commit.go: the writer and its group commit: a writerOp is one call
//     waiting for the writer (createCall, deleteCall or compactCall, each
//     its own type that applies itself to the group and answers itself),
//     groupState is what a group has decided so far, and commitGroup
//     commits the group as one synced batch before any call is answered;
//     the batch writer and the point reads (getJSON, getRaw) are here too.
//   - decide.go: a create call decided (createCall, Store.Create, decide):
//     created, replayed, idempotency_conflict or refused, and the key's
//     keep_until.
//   - delete.go: a delete by the task's owner (deleteCall, Store.Delete).
//   - compact.go: compaction of expired keys and retired records
//     (compactCall, Store.Compact, the background loop).
//   - records.go: the records read by sequence, scope or key (Store.Records).
//   - request.go, validate.go, reply.go: a call checked against its
//     request document, the calls validated, and the create reply decoded.
//   - service.go: Serve (joining the deployment, endpoints) and the
//     service's life (Stop, the lease lost, the fault switch); handlers.go:
//     the endpoints' handlers, replies, create stats and a create's spans.
//   - lease.go, adopt.go: the lease of one instance and the adoption of
//     one store per deployment.
//   - host.go: Host, the one way a process hosts the service, with its
//     readiness checks; client.go and taskservice.go: the Client and the
//     taskservice.Service over it. cmd/provider only parses flags and
//     calls these.
//   - api.go: the types on the wire; benchload.go: the bench's preload
//     and storage reference, never used by the service.
//
// Run one service instance per deployment, on the store it adopted: Pebble's
// lock refuses a second process on the same directory, the lease a second
// instance on another, and the adoption record any other store at any time.
package provider
