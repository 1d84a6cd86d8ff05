package endpoint

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/internal/redact"
)

// Parse checks raw, the URL of the server an adapter calls, and returns it
// in its normal form (Normalize). It must be http or https, name a host,
// and carry no user, password, query or fragment. name starts every error
// ("caldav: CollectionURL"); userHint says where credentials go instead
// ("give an API key"). The URL is shown only through redact.URL: its user
// information, query and fragment can carry a password or a token.
func Parse(name, userHint, raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("%s is empty", name)
	}
	shown := redact.URL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL, or the piece that failed.
		return nil, fmt.Errorf("%s %q does not parse as a URL", name, shown)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return nil, fmt.Errorf("%s %q: the scheme must be http or https", name, shown)
	}
	if u.User != nil {
		// Not shown at all: a user with a password is refused as a whole.
		return nil, errors.New(name + " must not carry a user or password; " + userHint)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%s %q names no host", name, shown)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" {
		return nil, fmt.Errorf("%s %q must not have a query or a fragment", name, shown)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%s %q is not a hierarchical URL", name, shown)
	}
	return Normalize(u), nil
}

// Normalize returns u with a lower-case scheme and host, without a default
// port, with a clean path that ends in "/".
func Normalize(u *url.URL) *url.URL {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Host)
	if h, p, err := net.SplitHostPort(host); err == nil {
		if scheme == "http" && p == "80" || scheme == "https" && p == "443" {
			host = h
			if strings.Contains(h, ":") {
				host = "[" + h + "]"
			}
		}
	}
	p := path.Clean("/" + u.Path)
	if p != "/" {
		p += "/"
	}
	return &url.URL{Scheme: scheme, Host: host, Path: p}
}

// Client returns the client an adapter makes its requests with: a copy of
// given when it is not nil, else one with timeout (defaultTimeout when
// zero) over a transport that keeps at most maxConns connections to a host
// open at once (defaultMaxConns when zero). Either way it never follows a
// redirect.
func Client(given *http.Client, timeout, defaultTimeout time.Duration, maxConns, defaultMaxConns int) *http.Client {
	var client http.Client
	if given != nil {
		client = *given
	} else {
		client.Timeout = timeout
		if client.Timeout == 0 {
			client.Timeout = defaultTimeout
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxConnsPerHost = maxConns
		if t.MaxConnsPerHost == 0 {
			t.MaxConnsPerHost = defaultMaxConns
		}
		t.MaxIdleConnsPerHost = t.MaxConnsPerHost
		client.Transport = t
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client
}
