// Package storedmsg is the one way the project reads what a JetStream
// stream has stored, in two forms:
//
//   - one message: the next message stored on one subject from a sequence
//     or a time (the JSON API's message get with next_by_subj), sent to the
//     API prefix or domain of the caller's JetStream context (Getter), which
//     the executor and send use to find a receipt;
//   - the whole stream as of a moment (ReadStream, ReadFrom), through an
//     ephemeral consumer of its own that hands every stored message on,
//     status messages included, which the audit and redrive use.
//
// It also reads, from a stored receipt's headers, which approval message
// the receipt ends (document.Ends decides).
//
// It reads and never writes a stream: it must never publish to a stream,
// acknowledge or delete a message. It must never import Pebble, nats-server
// or internal/executor: the executor and send read through it, not the
// other way round.
package storedmsg
