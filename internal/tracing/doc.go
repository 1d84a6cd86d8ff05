// Package tracing is how the programs and the SDK take part in an
// OpenTelemetry trace: the project's tracer, W3C trace context carried in
// NATS headers, the attributes its spans share and a log handler that adds
// the trace and span ids to each record made with a traced context.
//
// It uses the OpenTelemetry API only: the global tracer provider and text
// map propagator, which do nothing until a program (package otlp, through
// cli.Main) or an application sets them. A span that does not record costs
// a context value and no attribute: callers build attributes only for a
// span that IsRecording.
//
// Rules for maintainers: no span carries a task's title, assignee,
// evidence, a credential or a URL's query; attributes come from the keys
// this package names, so that a reader finds them in one place. It must
// never import Pebble, nats-server or the rest of this module: the SDK's
// send and every program use it.
package tracing
