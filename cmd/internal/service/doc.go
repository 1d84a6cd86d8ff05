// Package service opens the task service a command calls, from its
// configuration: the fake task service over NATS, CalDAV collections or a
// Redmine project. A command adds the flags with FlagsVar (or fills a
// Config), checks them after parsing with Check, and opens the service
// with Open; serve, probe, demo, status, verify and calendars then see one
// value, a *Service: what the executor calls, where it serves, the
// adapter of the destination the probe and the demo use (its optional
// abilities, taskservice.Lister, taskservice.Deleter and
// taskservice.Finder, found by type assertion), and what releases it.
//
// It also holds the executor's commands that report on the task service
// without their command lines: Status (the service's counters or tasks,
// the consumer and the receipts), Probe (a run of the probe against the
// service) and Calendars (a CalDAV account's calendars), each with the
// flags its FlagsVar defines.
//
// Adding a kind (for example caldav) is three steps:
//   - a constant and its line in kinds;
//   - its flags in FlagsVar (--caldav-url, --caldav-user,
//     --caldav-password-file) and their checks in Check: flags of one kind
//     are refused with another kind; the password is read after parsing,
//     from the file or else from $CALDAV_PASSWORD (through a getenv field
//     that tests replace, as cli.ConnFlagsEnv does), never from a flag value
//     and never logged;
//   - a case in Open that builds the adapter (from its own package);
//     NeedsNATS says false for it, so that a command does not connect to
//     NATS only to reach a service over HTTP (true for redmine, whose
//     per-key locks live in the intent ledger on JetStream: Open then takes
//     the ledger through connect). Where the service can say so without
//     creating anything, Reach checks that it answers and accepts the login
//     (serve, probe and demo call it first).
//
// An adapter's HTTP client is built here, with a bounded transport (at
// most the adapter's DefaultMaxConns connections to the server at once).
// Only a Config with LoseReplies wraps it in the fault transport that lets
// the probe, the demo and tests lose a reply; serve's calls never pass
// through it.
//
// The package also keeps the record of the service the executors call
// (record.go): serve writes it at start (RecordAtStart), and status and
// verify, run without task service flags, read the service it names
// (Settle), never sending a password or an API key to a recorded URL the
// operator did not give.
//
// It must never import pgx or a test rig.
package service
