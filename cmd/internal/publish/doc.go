// Package publish is the publisher's commands without their command lines:
// request (a task request and its candidate, from flags), digest, approve,
// check (the gate run locally), send (the three documents as one envelope,
// or a stored envelope, and its receipt), keygen and trust. The demo's
// separate publisher processes run send too. Each command's flags are
// defined on a flag set by its FlagsVar function; once they are parsed, its
// run function does the work and returns an error whose exit status
// cli.ExitCode reads.
//
// It must never import Pebble, nats-server or pgx: the publisher, which
// imports it, runs beside the reviewer without them.
package publish
