// Package redact makes URLs fit to show in errors, log lines, refusals and
// reports: the parts of a URL that can carry a secret — the password of its
// user information (or all of it, which may be a token), its query and its
// fragment — are replaced by a marker; the scheme, host and path, which say
// where, are kept.
//
// It must never return any byte of those parts, also for a URL that does
// not parse, and never fail: whatever it is given, it returns something safe
// to print.
//
// It must never import anything but the standard library.
package redact
