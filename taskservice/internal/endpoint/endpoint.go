package endpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

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
// redirect, and its transport (given's own, if it has one) is wrapped by
// otelhttp, unless it is already: each request is a client span of the
// trace its context holds, and carries that trace's context to the server.
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
	if _, traced := client.Transport.(*otelhttp.Transport); !traced {
		client.Transport = otelhttp.NewTransport(inMemoryBody{client.Transport})
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client
}

// inMemoryBody gives the transport under otelhttp a request body it knows
// to be in memory, as the adapter made it, in place of the one otelhttp
// wraps: net/http then sends the headers and the body in one write, as
// without tracing. Sent apart, the body of a PUT that Radicale refuses
// (If-None-Match) arrives after its answer, unread, and the connection is
// reset under the caller. A body that was not in memory (no GetBody) is
// passed on as it is.
type inMemoryBody struct{ next http.RoundTripper }

func (t inMemoryBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.GetBody == nil {
		return t.transport().RoundTrip(r)
	}
	b, err := io.ReadAll(r.Body)
	if cerr := r.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("endpoint: reading the request body: %w", err)
	}
	in := new(http.Request)
	*in = *r
	in.Body = io.NopCloser(bytes.NewReader(b))
	in.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return t.transport().RoundTrip(in)
}

func (t inMemoryBody) transport() http.RoundTripper {
	if t.next == nil {
		return http.DefaultTransport
	}
	return t.next
}
