package console

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// TraceIDPlaceholder is where a trace URL template (--trace-url) takes a
// trace id.
const TraceIDPlaceholder = "{trace_id}"

// checkTraceURL refuses a trace URL template that does not make an http or
// https address of a trace: one without TraceIDPlaceholder, of another
// scheme, without a host, or with a user name or password in it (the link
// is shown on every page).
func checkTraceURL(template string) error {
	if !strings.Contains(template, TraceIDPlaceholder) {
		return fmt.Errorf("no %s in it, where the trace id goes", TraceIDPlaceholder)
	}
	u, err := url.Parse(traceURL(template, "0af7651916cd43dd8448eb211c80319c"))
	switch {
	case err != nil:
		return errors.Unwrap(err)
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("not an http or https URL")
	case u.Host == "":
		return errors.New("no host in it")
	case u.User != nil:
		return errors.New("a user name or password in it, which every page would show")
	}
	return nil
}

// traceURL is the address of the trace traceID by the template: "" when
// there is no template or no trace.
func traceURL(template, traceID string) string {
	if template == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(template, TraceIDPlaceholder, traceID)
}
