// Package redmine is a task service adapter for Redmine, a tracker that
// keeps no idempotency key and has no create-if-absent: every POST makes a
// new issue. The adapter marks every issue it creates with its key (scope
// and intent id) and request digest in a custom field, looks the key up
// before a create, and holds a per-key lock (taskservice.Locker) across the
// lookup and the create, so that two callers never both create; a create
// whose outcome is unknown leaves its key in doubt, so that it is not made
// again while it may still land.
//
// # The mark
//
// One issue custom field (DefaultField, "sendtwice key": format Text,
// for all projects, used as a filter, searchable, every tracker) holds
// the mark. Without a mark key (Config.MarkKey nil) it is "st1 <scope>
// <url.QueryEscape(intent id)> <request digest>" (Mark); with one it is
// "st2 <scope> <escaped intent id> <request digest> <tag>" (TaggedMark),
// the tag being proof.Tag(key, "redmine mark", scope, intent id, digest):
// 128 bits of HMAC-SHA256 that nobody without the key can make. A key is
// looked up with Redmine's "starts with" filter once per version, on "st1
// <scope> <escaped intent id> " (MarkPrefix) and on the same with "st2"
// (GET /issues.json?cf_<id>=^PREFIX with status_id=*, so that closed
// issues count, and subproject_id=!*, so that the key's scope is the
// project itself; Redmine takes one value per "starts with" filter, so
// the two versions take two requests), page by page, and every mark found
// is then read exactly (ParseMark): on SQLite that filter ignores the case
// of ASCII letters, and a value with "|" would be split by the short
// filter form (an escaped intent id holds none).
//
// # Proof
//
// Anyone who may add issues to the project can write any mark. With a
// mark key, an issue is taken as its key's task only when it is proven
// the deployment's: its author (issues.json's author.id) is the API key's
// own user, which Check reads from GET /users/current.json, and a tagged
// mark's tag is the one the key makes. Every other issue that claims the
// key (planted before the approval ran, a mark copied onto a second
// issue, a tag edited or made up) is never taken: the lookup leaves it
// out of the decision, so the real approval creates its issue once, is
// replayed from it, and two proven issues alone are ErrDuplicates (a real
// double). The result's Reason names each such issue, its author and why
// (on any outcome), and ListTasks sets ListedTask.Unproven for it, which
// verify reports. Keys created before mark keys keep working: an untagged
// mark is proven when its author is the API key's user, the only account
// that made marks before. So the pipeline's Redmine account must be its
// own, used by no person and no other program: its API key is the proof
// of every untagged mark, and whoever holds it can plant one. Without a
// mark key every mark is believed, whoever made it, as before keys.
//
// # Create, Find, Delete
//
// Create looks the key up first and answers from an issue that carries
// it without a lock (an issue leaves only by a deletion, which the ledger
// covers; so a redelivery after a lost answer is answered at once). When
// none does, it takes the key's lock (Config.Locks: the executors' intent
// ledger on JetStream), waiting and polling while another caller holds it
// (when its context ends first: transient, wrapping
// taskservice.ErrLocked), and looks again: one issue with the request's
// digest → Replayed; another digest → Conflict, nothing changed; two or
// more → a permanent error naming them (ErrDuplicates; with a mark key,
// proven issues only: see Proof); none and the key in doubt (below) → an
// error marked taskservice.InDoubt that says until when, nothing sent;
// none → the key's in-doubt record is written, Lock.Held, then POST
// /issues.json, the lock renewed while it is in flight → Created. A 201
// whose issue does not carry the mark (Redmine drops a value for a field
// not enabled for the project or tracker) is a permanent error naming the
// issue.
// Find is the lookup alone (taskservice.Finder); a deleted issue
// takes its mark with it (RemembersDeletedKeys is false), so the executor
// composes the adapter with taskservice.KeepDeletedKeys and its ledger.
// The task id is the number in decimal (TaskID).
//
// # A create in doubt
//
// The in-doubt record (taskservice.Doubts, kept by Config.Locks) is
// written before the POST, only if the key has none, for the request
// lifetime (Config.RequestLifetime): how long after it is sent a POST may
// still land. Redmine's definite answer (the issue, or a refusal that
// created nothing) removes it, as do a POST whose connection could not be
// made and a lookup that finds the issue; an
// unknown outcome (a timeout, a lost connection, a 5xx, a caller killed)
// keeps it until its lifetime has passed. Meanwhile no create is sent,
// even by a caller that took the lock after it expired under a slow POST
// or was purged. The limit of the class: a POST that Redmine saves more
// than the request lifetime after it was sent can duplicate.
//
// # Check
//
// Check reads, creating nothing: GET /users/current.json (401: the key is
// refused), the project, and the mark's field, which it finds through GET
// /custom_fields.json with an administrator's key (format, filter and
// trackers are checked) and otherwise on an issue of the project (see
// Check); then a filter on a value no mark has must find nothing, since
// Redmine silently drops a filter on a field that is not a filter. A
// failure is permanent and says how to make the field.
//
// # HTTP
//
// The API key is sent as X-Redmine-API-Key, only to the configured
// server: every URL is built from the base URL, redirects are never
// followed (a 3xx is a permanent error showing its target without a query
// or user information), and no error shows the key. Connections are
// bounded (MaxConns). 5xx, 408, 429, timeouts and lost connections are
// transient; 401, 403, 404 and 422 (with Redmine's "errors") permanent.
//
// The package depends on the standard library and taskservice alone:
// nothing of NATS or Pebble, nothing of the pipeline, so that an
// application uses it on its own.
package redmine
