// Package console is the approval console: a small web application in which
// a reviewer reads a candidate beside the task request proposed from it,
// approves the request, and watches the receipt of every send.
//
// # The candidates folder
//
// The console reads one folder. Each review item is a pair of files with a
// common NAME:
//
//	NAME.candidate.json   an action-candidate.v1
//	NAME.request.json     the task-request.v1 proposed from it
//
// The folder is read again on every page, so a changed file shows at once.
// Other files are ignored; a NAME with only one of the two files is listed
// with what is missing. Nothing is ever written to the folder.
//
// # Approving and sending
//
// Pressing Approve makes a task-approval.v1 (approve.Approve, approved_by
// from the form) over the two documents exactly as the page showed them,
// keeps it for the item, and publishes the three documents as one envelope
// through package send (send.Build, Client.Publish: a new Nats-Msg-Id).
// Pressing again publishes the kept approval again: a real resend, which the
// task service answers as replayed with the first task. Each press is one
// send with a page of its own, which shows the receipt for that send's
// stream message: the console listens for it from before the publish
// (Client.Listen), without a consumer, so it needs only a publisher's
// rights.
//
// Every send runs the gate locally first (send.Bindings, or send.Trusted
// with Config.Trusted), on the message as an executor will read it, with the
// files as they are on disk at that moment. When a file changed after the approval, the gate refuses,
// nothing is published, and the page says which check failed and why.
//
// A signed approval is valid until its not_after, which the review page
// shows; past it, the console refuses to send it (check expiry) until it is
// discarded and made again. With Config.Trusted, every send runs the
// executors' gate, signature, expiry and scope included, and with Config.KeyOwner
// approvals are made only in the name the trusted approvers give the key.
//
// Approvals are kept in memory: a restarted console approves afresh, and the
// task service still answers a new approval of the same intent as replayed.
//
// # Who may use it
//
// Every request must name an allowed host in its Host header (Config.
// AllowedHosts; DefaultHosts gives the listen host, localhost, 127.0.0.1
// and [::1] with the port), so that a web page cannot reach the console
// through DNS rebinding: it is answered 421. Every request except the
// stylesheet and script must then carry the session cookie (HttpOnly,
// SameSite=Strict, for this run only) that LoginPath sets: that address
// holds a secret token from crypto/rand, compared in constant time, which
// the command prints once at start. Without the cookie the answer is 401
// with a page that says what to open. Posts are also checked for a foreign
// Origin or Referer, besides the cross-origin protection.
//
// # Without JavaScript
//
// Every view is plain HTML with forms. A send redirects to its page; while
// its receipt is pending, that page refreshes once (noscript) to a variant
// that waits for the receipt on the server. With JavaScript, the page instead
// subscribes to server-sent events and shows the receipt as soon as the
// executor stores it in the RECEIPTS stream.
//
// # What it must never do
//
// It must never publish what the gate refuses, never write to the
// candidates folder, never fill in an unknown assignee or due date, never
// make an approval in another name than its signing key's owner (with
// KeyOwner), and never answer a request that lacks an allowed host or the
// session cookie.
//
// Run is the publisher's console command without its command line: from
// the flags FlagsVar defines it settles the approver, connects, listens and
// serves the console until stopped.
//
// It must never import Pebble or nats-server: it is a client of the
// pipeline, with a publisher's rights only.
package console
