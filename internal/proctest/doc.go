// Package proctest runs the server process of a test rig (internal/davtest,
// internal/redminetest): it finds a free port, starts the command with its
// output appended to a file, waits until it answers HTTP (failing the test,
// with the end of its logs, when it exits or does not answer in time), and
// stops it with SIGTERM, then SIGKILL after a grace period. Restarting is
// Stop, then Start again.
//
// It is a test rig: it must never be imported by a production package, and
// never import anything but the standard library.
package proctest
