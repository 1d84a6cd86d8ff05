// Package caldav is a task service over a CalDAV calendar collection (RFC
// 4791): it keeps the taskservice contract with the server's own atomic
// create-if-absent, so that a resent approval reaches the calendar and
// creates no second task. Nextcloud Tasks, Apple Reminders, Thunderbird
// and DAVx⁵ show the tasks it makes; it is proven against Radicale and
// Xandikos.
//
// # One intent, one resource
//
// Create writes the task of one key, the pair (scope, intent id), as one
// VTODO in one resource, named after the key (see ResourceNameOf:
// ScopedResourceName's name, with a mark key's tag when there is one):
//
//	PUT {collection}/{ResourceNameOf(scope, intent_id)}
//	If-None-Match: *
//
// The VTODO's UID is TaskIDOf(scope, intent id), SUMMARY the title,
// DESCRIPTION the candidate's summary, evidence quotes, transcript and
// source version in plain lines, STATUS NEEDS-ACTION, DUE the due date only
// when there is one (a date-time with a UTC offset other than zero as a
// local time with a TZID and a VTIMEZONE of that fixed offset, a UTC one
// as a UTC DATE-TIME, a full-date as a DATE), and CREATED and DTSTAMP the
// time of the call. The request digest,
// the intent id, the scope, the request id, the candidate id, the source version, who
// approved it and the call reference travel as X-SENDTWICE-* properties
// (the Prop* constants), and with a mark key PropProof; an assignee person reference, when there is one,
// as X-SENDTWICE-ASSIGNEE-REF, since it names a person and is not a
// calendar address. The request document itself (taskservice.Request's
// Request) is not stored: the adapter runs inside the executor, which
// hashed it, and the digest is what the server keeps to compare a resend.
//
// The server's answer decides the outcome:
//
//   - 201 (or another 2xx: with If-None-Match: * any success is a create)
//     → taskservice.Created;
//   - 412 (a resource has the name) → the resource is read back: our
//     digest → taskservice.Replayed with its task; another digest →
//     taskservice.Conflict, the resource untouched; a resource that is not
//     ours (no VTODO, or one without our marks and with another UID) → an
//     error wrapping ErrNotOurs; the key's own task (its UID or intent id)
//     without our digest property, which a calendar client dropped when it
//     rewrote the task → an error wrapping ErrMarksRemoved; with a mark
//     key, a resource with our marks but no valid proof → an error
//     wrapping ErrUnproven;
//   - the CalDAV precondition no-uid-conflict (Radicale: 409; Xandikos: a
//     207 holding a 412): another resource, under another name, holds the
//     UID the task would have → an error wrapping ErrUIDClash;
//   - 5xx, 408, 429, a timeout, a lost connection → taskservice.Transient;
//   - 401, 403, a missing collection (404, or 409 as RFC 4918 answers a
//     PUT below a missing collection), a redirect, any other answer →
//     taskservice.Permanent, with the status in the message.
//
// The errors of ErrNotOurs, ErrMarksRemoved, ErrUnproven and ErrUIDClash are permanent
// and marked taskservice.NotCreated: the call created nothing, and a resend
// is refused the same way until the resource named is removed or mended.
// Their text states the reason, which the executor puts in the dead letter,
// its receipt and its log.
//
// # Finding and checking the calendar
//
// Discover lists an account's calendars from any URL on its server, the
// standard way: the URL's current-user-principal (RFC 5397), else that of
// /.well-known/caldav (RFC 6764, its redirects followed on the same server
// only) or of the server's root; the principal's calendar-home-set (RFC
// 4791 §6.2.1); each home's calendars (PROPFIND, depth 1) with their
// display names and supported-calendar-component-set (none: every
// component). FindCalendar picks the calendar that accepts tasks (VTODO)
// by its display name. Check, before a first create, makes sure with one
// PROPFIND (depth 0) that the collection URL is a calendar that accepts
// tasks and that the login is accepted; when it is not, its error
// (ErrNotTaskCalendar, or ErrLoginRefused for a 401 or 403) says what the
// URL is instead (a principal, a calendar home, a plain collection, a
// calendar for events only, nothing, a redirect with its target) and
// lists the account's calendars that accept tasks.
//
// The adapter relies on the server honouring If-None-Match: * atomically
// (RFC 9110 §13.1.2), as Radicale and Xandikos do; a server that ignored it
// would overwrite a task and answer as if it had created it, which a probe
// of concurrent calls shows as more than one create.
//
// Result.TaskID is the VTODO's UID: for a task made here, the intent id in
// the default scope and the scope, "~~" and the intent id in any other,
// followed with a mark key by "~." and the tag (for a conflict with
// someone else's resource, that resource's UID).
// Result.StoreID is StoreID: "caldav-" and 16 hexadecimal digits of the
// SHA-256 of the normalized collection URL; keys are remembered per
// collection (Scope), and in it per caller scope. Result.Counts is nil: a CalDAV server keeps no
// counters, so an audit counts from the server's own log and storage.
//
// # Scopes: resource names in one collection
//
// A caller scope maps to resource names inside the one configured
// collection, not to a collection per scope. The collection is what a
// person subscribes to in their task app and what the executor's
// credentials are granted: one collection per scope would need the right
// to make calendars (MKCALENDAR), a subscription per scope, and a way to
// route a scope to a collection, while the server's create-if-absent works
// per resource name anyway. Scopes are confined where they are named, on
// the NATS subjects, before a call reaches the adapter. The default scope
// keeps the names of before scopes ("intent-0001.ics"), so tasks made then
// are still found under their keys; any other scope prefixes its name
// ("team-a~~intent-0001.ics"), and its VTODO's UID is "team-a~~intent-0001"
// (a collection's UIDs must be unique, RFC 4791 §5.3.2.1). A resource
// found at a key's name that names another scope is a conflict, with the
// reason.
//
// # A mark key: nobody else can plant or squat a task
//
// Anyone who may write the collection (another user of a shared calendar,
// any client with the credentials) could put a resource at a future
// task's name before its approval runs, with our marks and the approved
// digest copied: without a mark key that resource is answered Replayed, a
// task the pipeline never made. With Config.MarkKey, the deployment's
// secret, the name and the UID of a key carry its tag (proof.Tag of the
// scope and the intent id: "team-a~~intent-0001~.<32 hexadecimal
// digits>.ics"), which nobody without the key can make, and every VTODO
// written carries PropProof, a tag of its scope, intent id, request digest
// and UID. A resource without a valid proof, at the tagged name or
// elsewhere, is never taken as ours: Create and Find refuse it with an
// error wrapping ErrUnproven that names its href and the key it claims,
// and the listing says why it is unproven (taskservice.ListedTask's
// Unproven), for verify to report. An owner's edit of the task (its
// summary, its status) keeps the proof; an edit of the marks breaks it.
//
// Tasks made before the key keep their names and UIDs of then, without a
// proof. Create puts a key only under its tagged name: a key created
// before is known to the executors' intent ledger, which routes a resend
// to Find (taskservice.KeepDeletedKeys); Find, when the tagged name is
// absent, reads the name of before the key, and takes the task there only
// with a valid proof, else refuses it saying that it must be proven
// first. ProveLegacy, run over the ledger's entries, proves such a task:
// it writes PropProof into the resource the entry names (its digest and
// its UID checked; If-Match on the ETag read, so that an owner's change
// made in between is not overwritten), and changes nothing else.
//
// # A deleted task: the server forgets the key
//
// The key lives as long as the resource: a task deleted by a user in the
// calendar frees its name, and a PUT with If-None-Match: * succeeds again
// (measured on Radicale and Xandikos). The adapter says so
// (RemembersDeletedKeys is false) and offers Find, a GET that creates
// nothing, so that taskservice.KeepDeletedKeys can compose it with the
// executors' intent ledger: a resend after the deletion is then answered
// replayed with the task marked deleted, and nothing is created again. The
// adapter alone, without the ledger, creates the task again. What remains
// is a delete between the server's 201 and the ledger write: when the 201
// is lost and the owner deletes the task before the redelivery, the
// redelivery creates it again (measured by TestTheLedgersRemainingWindow:
// in most trials that lose the reply and delete within tens of
// milliseconds; in none whose reply arrived).
//
// # For a probe and an audit
//
// Tasks lists the VTODOs in the collection (one calendar-query REPORT):
// ours, those carrying X-SENDTWICE-INTENT-ID, with their intent id, task
// id, scope, digest, href and, with a mark key, why one is unproven, and
// the count of all VTODOs. DeleteTask (and Delete, in the default scope)
// removes the task of one key, and only a resource made here for it (with
// a valid proof, under a mark key). Scope and
// StoreID say where keys are remembered.
//
// # What it never does
//
//   - It never overwrites or changes a resource: every create is a PUT
//     with If-None-Match: *; a conflict leaves the resource as it is. The
//     one change, ProveLegacy's, adds the proof to a task of ours only as
//     it was read (If-Match).
//   - It never sends the password anywhere but the collection's server:
//     every request goes to the collection's scheme and host, redirects
//     are not followed, the collection URL may not carry credentials, and
//     no error message holds the password.
//   - It never echoes a part of a URL that can carry a secret: a refused
//     collection URL, or a redirect's target, is shown without its user
//     information, query or fragment.
//   - It never guesses: no ATTENDEE or assignee without an assignee
//     reference, no DUE without a due date.
package caldav
