// Package consoletest serves the console over HTTP for a test: Start runs
// it with the fixtures of testdata/console against a test environment
// (internal/testenv), with a clock that moves a second on each reading, and
// signs a cookie jar in through the console's start address. The console's
// own tests (internal/console) and its browser tests (tests/console, in a
// module of their own so that chromedp stays out of this module's graph)
// both start it so.
//
// It is a test rig: it must never be imported by a production package.
package consoletest
