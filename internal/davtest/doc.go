// Package davtest runs real CalDAV servers for tests: Radicale and
// Xandikos, each as its own process on loopback, with its own storage
// folder in the test's temporary directory and a calendar collection made
// for the test. What a test asserts about the server is read from the
// server itself: the requests and answers from its own request log, the
// tasks existing from the .ics files in its storage folder.
//
// # The servers' logs
//
// Radicale (3.1) is run with its logging level at info. It logs every
// request twice, on stderr, from the thread that handles it:
//
//	[...] [INFO] PUT request for '/davtest/tasks/a.ics' received from 127.0.0.1 using 'Go-http-client/1.1'
//	[...] [INFO] PUT response status for '/davtest/tasks/a.ics' in 0.004 seconds: 201 Created
//
// The first line is written when the request arrives, the second when its
// answer is ready and before it is sent, so both are in the log by the time
// the client has the answer. The path is the URL path after
// percent-decoding, written as a Python string literal (quoted, with
// backslash escapes), and it is decoded as one. (At the debug level
// Radicale also logs headers and bodies; counting needs only these lines.)
//
// Xandikos (0.2.8) serves with aiohttp, whose access log (the logger
// aiohttp.access, on stderr at info) has one line per request, written
// after the answer has been sent:
//
//	INFO:aiohttp.access:127.0.0.1 [30/Nov/2026:23:58:28 +0000] "PUT /user/calendars/tasks/a.ics HTTP/1.1" 201 205 "-" "Go-http-client/1.1"
//
// The path is the request line's, as sent; it is percent-decoded before
// it is compared. Xandikos therefore logs a request only once it has been
// answered: a request that never gets an answer (the server killed in the
// middle) does not appear, and a request appears a moment after its client
// has the answer. So before it counts, a running Server sends a marker
// request and waits until the marker is in the log; every request answered
// before the marker is in the log then too.
//
// For each server Received counts the requests the log shows as received
// (Radicale: its "request for" lines; Xandikos: its access lines) and
// Answered the answers with a status (Radicale: its "response status"
// lines; Xandikos: the status in its access lines).
//
// Radicale's built-in server listens with a backlog of 5 connections and
// davtest raises its max_connections to 256: many simultaneous connections
// (a test's 64 concurrent calls) are all served, but those beyond the
// backlog wait for the client's SYN to be sent again (after 1 s, then
// 2 s more), so such a test takes seconds on Radicale.
//
// # Storage
//
// Radicale keeps a collection as a folder holding one file per resource,
// named as the resource (collection-root/<user>/<calendar>/<name>.ics).
// Xandikos keeps it as a Git repository with a working tree holding one
// file per resource (<user>/calendars/<calendar>/<name>.ics). StoredNames
// lists the .ics files of the collection's folder, which for both is the
// set of resources the collection holds.
//
// # The clients
//
// Clients runs the task clients a person uses with such a server, as
// Debian packages them: vdirsyncer (0.19) syncs the collection into a
// local folder, one .ics file per task, and todoman (4.1) lists, shows and
// completes the tasks of that folder; vdirsyncer sync then writes the
// changes back. Each runs with its own configuration, status and cache in
// the test's temporary directory, with HOME there too, and with TZ set to
// the zone the person is in: todoman shows every time in that zone.
//
// It is a test rig, as internal/boundary checks: like internal/testenv it
// must never be imported by a production package. It never stands in for
// a server: every figure a test reads from it comes from the real
// server's log or storage.
package davtest
