// Package console holds the tests in Chromium (chromedp): the console's,
// and the one that opens Jaeger's UI at the demo's resend. They are
// in a module of their own (tests/) so that an application requiring
// github.com/sendtwice/sendtwice does not require chromedp. It has no code of
// its own.
//
// It must never be imported by a production package, and never import
// anything but the standard library.
package console
