// Package publish is the publisher's commands without their command lines:
// digest, approve, check (the gate run locally), send (the three documents
// as one envelope, and its receipt), keygen and trust, and the executor's
// send of a stored envelope. Each command's flags are defined on a flag set
// by its FlagsVar function; once they are parsed, its run function does the
// work and returns an error whose exit status cli.ExitCode reads.
//
// It must never import Pebble, nats-server or pgx: the publisher, which
// imports it, runs beside the reviewer without them.
package publish
