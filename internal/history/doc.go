// Package history records every create call made through a task service
// contract (package taskservice), so that a fault run can afterwards be
// checked for linearizability (package linearize).
//
// It is the calls' side of the checks a fault run ends with: the audit
// (package audit, whose registry.go lists its checks by name) judges what
// the streams and the task service's records hold; linearize judges the
// history recorded here.
//
// A Recorder also records an owner's delete of a task (WrapDelete), as a
// call whose Op is OpDelete, answered Deleted; a create's response keeps
// the replayed result's deleted mark (task_deleted).
//
// A Recorder wraps a taskservice.Service. For each call it appends one JSON
// line, the invocation (call reference, intent id, request digest, the time
// the call was sent), before the call is made, and a second line, the
// response (outcome, task id, store id, or the error) and the time it
// arrived, after the call returns. Each line is one write to a file opened
// for appending, so a process killed at any moment (SIGKILL included)
// leaves every invocation it made on disk, and a call that was under way
// when it died as an invocation without response. Such a call, like one
// that ended in an error (a timeout, a lost reply, a restarted service),
// may or may not have taken effect; the reader keeps it as a call without
// a known response, and the checker must allow both.
//
// One file belongs to one process at a time; a process started later on the
// same file appends a new session to it. Read merges the files of several
// processes into one history.
//
// Times are wall-clock readings (Unix nanoseconds) taken by each process, so
// they compare across the processes of one machine, which read one clock.
// The time of a call is read before its invocation is written, and the time
// of its response after the call returned, so the recorded interval always
// contains the real one. Across machines the clocks would have to be
// synchronised more tightly than the calls are apart; this package does not
// try.
//
// A Recorder must never change a call or its result: the request goes to the
// wrapped service as given, and its result and error, the very values,
// come back to the caller. A line that cannot be written is reported
// (Recorder.Err, OnError) but never fails the call. Lines are not fsynced:
// they survive the process, not the machine.
//
// It must never import anything but the standard library and taskservice:
// it wraps any Service, whoever calls it.
package history
