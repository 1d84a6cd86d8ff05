// Package scenario builds the documents of the seed scenario — the candidate
// from the meeting, the request to create 「補上通知設定的檢查項目」, its
// approval, a changed request under the same intent id, a request with a new
// intent id and the same content, and the tampered messages — and generates
// further approved requests for demos and load. Its functions make requests
// for the fake task service's default destination, as the seed is; a For
// (Fake, CalDAV, Redmine, At a destination) makes the same documents for
// another provider and destination, approved with that provider's
// capability.
//
// The files under testdata/ at the project root are this package's output,
// kept current by its golden test (go test ./internal/scenario -update). It
// must never be used to bypass the gate: it builds inputs, it decides nothing.
//
// It must never import the NATS client, Pebble or internal/executor: it builds
// documents and runs nothing.
package scenario
