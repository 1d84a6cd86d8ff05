// Package natsconn is the project's one JetStream layer below the pipeline:
// it opens a NATS connection (Connect), opens or creates a key-value bucket
// (Bucket), and ends a connection (Drain: drain it, so that every reply and
// publish already handed to it goes out, and wait, bounded, until it is
// closed).
//
// Rules for maintainers:
//   - Every connection the project opens outside a test goes through
//     Connect, so that the reconnect policy and the error's shape are set in
//     one place; every bucket is opened or created through Bucket.
//   - It never retries a call, and never holds anything of the pipeline
//     (documents, streams, the task service): it knows connections and
//     buckets and nothing else.
//
// It must never import anything but the standard library, NATS and internal/redact.
package natsconn
