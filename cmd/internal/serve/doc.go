// Package serve is the executor's serve command without its command line:
// from its parsed flags it checks the configuration, starts what was asked
// (the embedded NATS server and task service, the HTTP endpoints, the
// reload of the trusted approvers on SIGHUP), sets up or binds to the
// topology, opens the task service and runs the executors until stopped.
// It also provisions the topology for deployments whose executors may not
// (the provision command).
//
// It must never import pgx or a test rig.
package serve
