// Package embedded runs inside the current process, for one-machine use and
// for tests, a NATS server with JetStream and, with StartStack, the fake task
// service beside it. The server keeps file storage under a directory of the
// caller's, fsyncs before every acknowledgement (sync_interval: always), and
// is open to every client or, with users, to each with its permissions.
// StartStack hosts the fake task service over a Pebble store in the same
// directory, serving over that server, unless told that the executors call
// another task service (StackOptions.NoService): then no store is opened or
// made.
// Stack.StartExecutor starts an executor on its own connection to the
// stack, as the public test kit (sendtest) and the test rigs do.
//
// It must never start a server that acknowledges a stored message before it is
// synced, and never listen beyond the address it is given.
//
// It must never import pgx or a test rig.
package embedded
