package redact

import (
	"net/url"
	"strings"
)

// Marker stands in for each part of a URL that was left out.
const Marker = "REDACTED"

// URL returns raw without the parts that can carry a secret: a password in
// the user information becomes Marker (a user name without a password, which
// may be a token, becomes Marker too), and a query or a fragment becomes
// "?REDACTED" or "#REDACTED". A URL that does not parse is cut by hand the
// same way, more widely: everything up to its last "@" before a query or
// fragment is taken for user information.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return byHand(raw)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Marker)
		} else {
			u.User = url.User(Marker)
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = Marker, false
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = Marker, ""
	}
	if u.Opaque != "" {
		// mailto:x, host:port without a scheme: an opaque part may hold
		// user information that url.Parse did not separate.
		u.Opaque = byHand(u.Opaque)
	}
	return u.String()
}

// URLs is URL for a comma-separated list, such as NATS server URLs.
func URLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = URL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// byHand cuts what may be a secret from a string that does not parse as a
// URL: the query and fragment, and anything before the last "@" that
// precedes them.
func byHand(s string) string {
	tail := ""
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		tail = s[i:i+1] + Marker
		s = s[:i]
	}
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		prefix := ""
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			prefix = s[:i+3]
		}
		s = prefix + Marker + s[at:]
	}
	return s + tail
}
