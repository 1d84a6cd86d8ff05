// Package storedmsg reads single stored messages of a JetStream stream the
// way the jetstream package does not offer: the next message stored on one
// subject from a sequence or a time (the JSON API's message get with
// next_by_subj), sent to the API prefix or domain of the caller's
// JetStream context. It also reads, from a stored receipt's headers, which
// approval message the receipt ends (document.Ends decides).
//
// It reads and never writes: it must never publish, acknowledge or delete a
// message. It must never import Pebble, nats-server or internal/executor:
// the executor and send read through it, not the other way round.
package storedmsg
