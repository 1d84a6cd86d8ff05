// Package cli holds what the commands share: the NATS connection flags
// (--server with $NATS_URL, authentication, TLS and --inbox-prefix, with the
// environment read after parsing so that --help never prints a value taken
// from it), connecting with sensible reconnect settings, the version from
// the build information, and slog loggers (text on a terminal, JSON on
// request).
//
// It must never hold command logic; mains stay thin and call into internal/.
package cli
