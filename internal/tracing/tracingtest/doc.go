// Package tracingtest records the spans of one test with a real
// OpenTelemetry SDK tracer provider (Record), and reads them: by name
// (Named, Wait), by attribute (Attributes, Check) and by status (Failed).
//
// It is a test rig: it must never be imported by a production package.
package tracingtest
