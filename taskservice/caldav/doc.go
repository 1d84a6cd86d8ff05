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
// VTODO in one resource, named after the key (see ScopedResourceName):
//
//	PUT {collection}/{ScopedResourceName(scope, intent_id)}
//	If-None-Match: *
//
// The VTODO's UID is TaskID(scope, intent id), SUMMARY the title,
// DESCRIPTION the candidate's summary, evidence quotes, transcript and
// source version in plain lines, STATUS NEEDS-ACTION, DUE the due date only
// when there is one (a date-time with a UTC offset other than zero as a
// local time with a TZID and a VTIMEZONE of that fixed offset, a UTC one
// as a UTC DATE-TIME, a full-date as a DATE), and CREATED and DTSTAMP the
// time of the call. The request digest,
// the intent id, the scope, the request id, the candidate id, the source version, who
// approved it and the call reference travel as X-SENDTWICE-* properties
// (the Prop* constants); an assignee person reference, when there is one,
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
//     rewrote the task → an error wrapping ErrMarksRemoved;
//   - the CalDAV precondition no-uid-conflict (Radicale: 409; Xandikos: a
//     207 holding a 412): another resource, under another name, holds the
//     UID the task would have → an error wrapping ErrUIDClash;
//   - 5xx, 408, 429, a timeout, a lost connection → taskservice.Transient;
//   - 401, 403, a missing collection (404, or 409 as RFC 4918 answers a
//     PUT below a missing collection), a redirect, any other answer →
//     taskservice.Permanent, with the status in the message.
//
// The errors of ErrNotOurs, ErrMarksRemoved and ErrUIDClash are permanent
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
// the default scope and the scope, a space and the intent id in any other
// (for a conflict with someone else's resource, that resource's UID).
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
// ("team-a~~intent-0001.ics"), and its VTODO's UID is "team-a intent-0001"
// (a collection's UIDs must be unique, RFC 4791 §5.3.2.1, and no intent id
// holds a space). A resource found at a key's name that names another
// scope is a conflict, with the reason.
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
// id, scope, digest and href, and the count of all VTODOs. DeleteTask (and
// Delete, in the default scope) removes the task of one key, and only a
// resource made here for it. Scope and
// StoreID say where keys are remembered.
//
// # What it never does
//
//   - It never overwrites or changes a resource: every write is a PUT with
//     If-None-Match: *; a conflict leaves the resource as it is.
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
