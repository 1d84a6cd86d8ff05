// Package tracingtest records the spans a test makes, with a real
// OpenTelemetry SDK tracer provider that samples every span and keeps the
// ended ones in memory, installed as the global provider with the W3C
// trace context propagator for the length of the test.
//
// A test that records spans changes the process's global provider: it must
// not run in parallel with another that traces.
//
// It is a test rig: it must never be imported by a production package.
package tracingtest
