// Package proctest runs the server process of a test rig (internal/davtest,
// internal/redminetest, internal/jaegertest): it finds free ports, starts
// the command with its output appended to a file, waits until it answers
// HTTP and itself holds its ports (failing the test, with the end of its
// logs, when it exits or does not answer in time), and stops it with
// SIGTERM, then SIGKILL after a grace period. Restarting is Stop, then
// Start again.
//
// A port found free may be taken by another process before the command
// binds it; that process would then answer the rig's requests. Start
// checks, on Linux through /proc, that the listening sockets are the
// process's own, and StartOnFreePorts tries other ports when they are not.
//
// It is a test rig: it must never be imported by a production package, and
// never import anything but the standard library.
package proctest
