package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Who may use the console: every request must name one of the allowed
// hosts in its Host header (so that a web page cannot reach the console
// through DNS rebinding), and must carry the session cookie that the
// one-time address printed at start sets (so that another local user, or a
// page that guessed the address, cannot use it).

// DefaultHosts returns the hosts a console listening on addr answers to:
// the listen host and localhost, 127.0.0.1 and [::1], each with the port.
// A listen address without a host (":8080", "0.0.0.0:8080") adds no host of
// its own; such a console is reached by other names only with AllowedHosts.
func DefaultHosts(addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	hosts := []string{net.JoinHostPort("localhost", port), net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port)}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return hosts, nil
}

// hostRule is one allowed host: a name or address, and a port, or "" for
// any port.
type hostRule struct{ host, port string }

// parseHost splits "host", "host:port", "[v6]" or "[v6]:port" into a
// lower-case host without brackets and a port ("" when none is given).
func parseHost(s string) (host, port string, ok bool) {
	s = strings.TrimSpace(s)
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else {
		host = s
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		} else if strings.Contains(host, ":") && net.ParseIP(host) == nil {
			return "", "", false
		}
	}
	if host == "" || strings.ContainsAny(host, "/\\@ \t") || strings.Trim(port, "0123456789") != "" {
		return "", "", false
	}
	return strings.ToLower(host), port, true
}

// CheckHost says why h cannot be an allowed host, or returns nil.
func CheckHost(h string) error {
	if _, _, ok := parseHost(h); !ok {
		return fmt.Errorf("%q is not a host name or address, with an optional :PORT", h)
	}
	return nil
}

func parseHostRules(hosts []string) ([]hostRule, error) {
	if len(hosts) == 0 {
		return nil, errors.New("console: no allowed hosts; use DefaultHosts(the listen address)")
	}
	var rules []hostRule
	for _, h := range hosts {
		host, port, ok := parseHost(h)
		if !ok {
			return nil, fmt.Errorf("console: allowed host %q is not a host name or address, with an optional port", h)
		}
		rules = append(rules, hostRule{host, port})
	}
	return rules, nil
}

// hostAllowed reports whether a Host header (or an Origin's host) names an
// allowed host. A Host without a port is port 80, the port http implies.
func (c *Console) hostAllowed(hostport string) bool {
	host, port, ok := parseHost(hostport)
	if !ok {
		return false
	}
	if port == "" {
		port = "80"
	}
	for _, r := range c.hosts {
		if r.host == host && (r.port == "" || r.port == port) {
			return true
		}
	}
	return false
}

// newSecret returns 32 random bytes in hex.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: making a secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// tokenParam is the query parameter of the address printed at start.
const tokenParam = "token"

// LoginPath is the path, with this run's secret token, that the reviewer
// opens first: it sets the session cookie and redirects to the list. It is
// meant to be printed once, at start, and nowhere else.
func (c *Console) LoginPath() string { return "/?" + tokenParam + "=" + c.token }

// sameSecret compares a presented secret with the expected one in constant
// time.
func sameSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (c *Console) sessionCookie() *http.Cookie {
	return &http.Cookie{Name: c.cookieName, Value: c.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// guard enforces the Host allowlist, the session and, for posts, the
// Origin or Referer, in that order, before next.
func (c *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.hostAllowed(r.Host) {
			c.refusePage(w, http.StatusMisdirectedRequest, "Wrong address",
				fmt.Sprintf("This console answers only to the host names it was started with (localhost, 127.0.0.1, [::1], its --listen host and each --allowed-host), not to %q. A web page that reaches it under another name is refused.", r.Host))
			return
		}
		// The stylesheet and the script are the same for everyone and
		// reveal nothing; the sign-in page needs the stylesheet.
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		if q.Has(tokenParam) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			if !sameSecret(q.Get(tokenParam), c.token) {
				c.signInPage(w, r, "This address's token is not this console's: it changed when the console was started again.")
				return
			}
			http.SetCookie(w, c.sessionCookie())
			q.Del(tokenParam)
			to := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, to.String(), http.StatusSeeOther)
			return
		}
		if ck, err := r.Cookie(c.cookieName); err != nil || !sameSecret(ck.Value, c.session) {
			c.signInPage(w, r, "This browser has not opened the console's address yet.")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !c.originAllowed(r) {
			c.errorPage(w, r, http.StatusForbidden, "Refused",
				"This form was sent from another site. Approvals are only accepted from the console's own pages.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originAllowed checks a state-changing request's Origin (or, without one,
// its Referer) against the allowed hosts when the browser sends one. An
// Origin of "null" (sent under Referrer-Policy: no-referrer) says nothing;
// Sec-Fetch-Site, checked by the cross-origin protection, decides then.
func (c *Console) originAllowed(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	if from == "" || from == "null" {
		return true
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return c.hostAllowed(u.Host)
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request, why string) {
	c.refusePage(w, http.StatusUnauthorized, "Open the console's address",
		why+" Open the address the console printed when it started (it ends in /?token=…); it lets this browser in for as long as the console runs.")
}

// refusePage is an error page for a request the console does not serve: it
// shows nothing of the console (no folder, no server).
func (c *Console) refusePage(w http.ResponseWriter, status int, title, message string) {
	c.render(w, status, "error", pageData{Title: title, View: errorView{Status: status, Title: title, Message: message, Bare: true}})
}
