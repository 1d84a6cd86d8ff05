// Package otlp starts a program's tracing from the environment, as
// OpenTelemetry's users expect: spans are exported over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, and nothing is traced when it is not. OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// and the exporter's own OTEL_EXPORTER_OTLP_* settings (headers, timeout,
// certificates) apply. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// turn it off. Every span is exported with its url.full cut before its
// query and fragment.
//
// It must never import NATS, Pebble or the rest of this module: cli.Main
// starts it in every program.
package otlp
