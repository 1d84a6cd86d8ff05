// Package jaegertest runs a real Jaeger for tests: Jaeger v1.75.0 (the v2
// binary, built on the OpenTelemetry Collector) as its own process on
// loopback, with in-memory storage, an OTLP/HTTP receiver and the query
// service's HTTP API and UI, each on a port free a moment before. What a
// test asserts about traces is read from Jaeger itself, through the HTTP
// API its UI uses (/api/services, /api/traces, /api/traces/{id}).
//
// # The binary
//
// Jaeger is built as a tool from the repository's tools module
// (tools/go.mod, a module of its own outside go.work, so that Jaeger's
// dependencies never join the workspace's version selection):
//
//	(cd tools && GOWORK=off go install github.com/jaegertracing/jaeger/cmd/jaeger)
//
// installs it as $GOBIN/jaeger, or $GOPATH/bin/jaeger ($HOME/go/bin/jaeger
// by default); .ci/run does so once. Binary looks there, then on $PATH, and
// reads the binary's build information to check its version. When it is
// missing or of another version a test skips, or fails when the environment
// has CI=true.
//
// # The configuration
//
// Start writes a configuration of its own rather than use the binary's
// all-in-one default, whose fixed ports (4317, 4318, 16686, 8888, …) two
// tests running at once would both want: the jaeger_storage extension with
// one memory backend, the jaeger_query extension on loopback (HTTP and
// gRPC, its own tracing off, so that Jaeger lists no service of its own),
// an OTLP receiver for HTTP only, no processor (spans go to storage as they
// arrive) and the Collector's own metrics off.
//
// # The UI
//
// Jaeger's UI (jaeger-ui, a JavaScript application) is built apart from
// the Go code and is not in the Go module, so a binary built from it serves
// a placeholder page in place of the UI; the HTTP API answers all the
// same. Given $JAEGERTEST_UI_ASSETS, a directory of jaeger-ui's built
// assets (its index.html and the rest), Start has the query service serve
// them (ui.assets_path); HasUI tells which the running Jaeger serves.
//
// # Asynchronous ingestion
//
// The receiver answers an export before the spans are stored, and a
// program's batch span processor exports on its own schedule, so a test
// looks a trace up with WaitTrace or WaitTraces, which poll until what it
// asks holds.
//
// It is a test rig, as internal/boundary checks: like internal/davtest it
// must never be imported by a production package, and never import
// anything but the standard library and internal/proctest.
package jaegertest
