// Package cli is the command-line kit the commands (executor, publisher,
// provider, bench) share: the NATS connection flags (--server with
// $NATS_URL, authentication, TLS and --inbox-prefix, with the environment
// read after parsing so that --help never prints a value taken from it),
// connecting with sensible reconnect settings (Open: with a JetStream handle,
// and a Close that drains the connection), the version from the build
// information, slog loggers (text on a terminal, JSON on request), flag sets
// and parsing, usage errors and exit statuses (with the error and status of
// a send that published but got no receipt), and signal handling (Main:
// the first SIGINT or SIGTERM shuts down in order, a second exits at once).
//
// It must never hold command logic; mains stay thin and call into internal/.
//
// It must never import Pebble or nats-server: a command that only sends
// stays free of the server's parts.
package cli
