// Package send is the Go API for services that publish approved task
// requests from their own code: it lays the three documents of one request
// (the action candidate, the task request and the reviewer's approval; see
// package approval for making them) in one task-envelope.v1 message,
// checks it locally as the executors will, publishes it onto the APPROVALS
// stream and waits for its receipt.
//
//	docs := send.Documents{Candidate: c, Request: r, Approval: a}
//	if _, err := send.Trusted(approvers).Documents(docs); err != nil {
//		// a *send.Refusal names the check, the path and the reason
//	}
//	env, err := send.Build(docs)
//	sent, receipt, err := send.NewClient(js).Send(ctx, env, send.Timeout(time.Minute))
//	switch receipt.Outcome {
//	case send.Created, send.Replayed: // the task exists: receipt.TaskID
//	}
//
// # Sending again
//
// Each Publish is a real send with a message id of its own (NewMsgID):
// publishing the same envelope again reaches the task service again, which
// answers Replayed with the first task. That is what makes "send again"
// safe after a timeout, and why the package never retries a send under a
// new id on its own. A caller that retries one publish itself (across a
// reconnect, a server restart) passes the same id to every try with the
// MsgID option: the stream stores the message once, and Sent.Duplicate
// says that a try found it stored, as long as the tries fall within the
// APPROVALS stream's duplicate window (2 minutes by default: topology's
// DuplicateWindow); a try after it is stored again, a new send. One id
// belongs to one envelope: a Client refuses (ErrOption) an id it used for
// another envelope within that window. Header adds the caller's headers (never
// a message id of its own), Deadline and Timeout bound the publish and,
// for Send, the wait.
//
// # Waiting for the receipt
//
// A message is published on its key's subject, approvals.<scope>.<intent_id>
// (the request's scope, "default" when it names none). Waiting creates no
// JetStream consumer: Send (and a Listener, for a caller that publishes
// itself or waits for many messages on one) subscribes to the key's
// receipts subject, receipts.<scope>.<intent_id>, before publishing, and
// reads each receipt back as the RECEIPTS stream stored it through a direct
// get of the last receipt of that subject
// ($JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent_id>); WaitReceipt,
// for a message published earlier, first reads what is stored. A receipt
// hidden from that read by a later one of its key is found by a scan of
// the key's stored receipts, where the credentials allow it. So a publisher
// needs only to publish approvals.<scope>.> and
// $JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.> and to subscribe to
// receipts.<scope>.> and its inbox: permissions confine it to its scopes.
//
// A Receipt is typed: its Outcome is a taskservice.Outcome (Created,
// Replayed, Conflict) or one of the executors' own (Rejected,
// DeadLettered), its Counts are taskservice.Counts, its times are
// time.Time.
//
// # Tracing
//
// Each publish is an OpenTelemetry producer span, "send <subject>" (such as
// send approvals.default.intent-0001), made through OpenTelemetry's API
// with the global tracer provider: a child of the span ctx holds, so that
// the caller's trace goes on through the executors and the task service,
// or else the root of a new trace. Its trace context travels in the
// message's traceparent and tracestate headers (W3C trace context), and
// Sent.TraceID names its trace. Nothing is traced, no trace header is
// added and Sent.TraceID is "" until the application sets a tracer
// provider (otel.SetTracerProvider); the headers carry the trace context
// once it sets the W3C propagator too (otel.SetTextMapPropagator with
// propagation.TraceContext).
//
// # Errors
//
// Every error starts "send: " and classifies with errors.Is and errors.As
// against the package's own sentinels and types, never the module's
// internal ones: ErrInvalid and ErrNotEnvelope for a document that cannot
// be sent, a *Refusal (ErrRefused) for what a local check refused,
// ErrOption for an option it cannot honour, ErrNotPublished when the stream
// did not acknowledge the message (it may or may not be stored), and a
// *NoReceiptError (ErrNoReceipt) for every wait for a published message
// that ended without its receipt: the message is stored, an executor may
// still carry it out, and sending again is safe.
//
// # Local checks
//
// The local check runs the executors' gate before anything is published.
// Its mode is always named: Bindings runs the checks that need no keys,
// Trusted adds the signature, expiry and scope checks against the executors'
// trusted approvers. The zero Check runs nothing and refuses. A local pass
// is advice, not permission: the executors run the gate again on every
// delivery, and their verdict is the one in the receipt. What a local
// check refused is never published.
package send
