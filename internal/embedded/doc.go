// Package embedded starts a NATS server with JetStream inside the current
// process, for one-machine use and for tests: file storage under a directory
// of the caller's, fsync before every acknowledgement (sync_interval: always),
// open to every client or, with users, to each with its permissions.
// StartStack adds the fake task service over a Pebble store in the same
// directory, unless told that the executors call another task service
// (StackOptions.NoService): then no store is opened or made.
// Stack.StartExecutor starts an executor on its own connection to the
// stack, as the public test kit (sendtest) and the test rigs do.
//
// It must never start a server that acknowledges a stored message before it is
// synced, and never listen beyond the address it is given.
//
// It must never import pgx or a test rig.
package embedded
