// Package cli holds what the commands share: the NATS server flag (with
// NATS_URL as its default, like other NATS tools), connecting with sensible
// reconnect settings, and slog loggers (text on a terminal, JSON on request).
//
// It must never hold command logic; mains stay thin and call into internal/.
package cli
