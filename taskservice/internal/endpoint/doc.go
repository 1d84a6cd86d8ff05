// Package endpoint holds what the task service adapters (taskservice/caldav
// and taskservice/redmine) share about the server they call: the checks of
// its URL, its normal form, and an HTTP client that never follows a
// redirect, so that credentials stay with that server, and whose requests
// are client spans of the caller's trace (otelhttp; a no-op until a tracer
// provider is set).
//
// It must never show a URL but through internal/redact, never follow a
// redirect, and never import anything but the standard library,
// internal/redact and otelhttp: the adapters that use it are written
// against taskservice alone.
package endpoint
