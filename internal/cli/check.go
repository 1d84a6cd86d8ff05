package cli

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// Check validates the configuration as far as it can be without the
// network: the server URLs parse, the authentication flags are consistent,
// and the files they name (credentials, nkey seed, TLS certificate, key and
// CA) can be read and parsed. It connects to nothing.
func (c *ConnConfig) Check() error {
	if err := CheckServerURLs(c.Server); err != nil {
		return err
	}
	opts, err := c.Options()
	if err != nil {
		return err
	}
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		// Applying the options loads the TLS files; the credentials file
		// is read below, as the connection would read it.
		if err := opt(&o); err != nil {
			return redactErr(err)
		}
	}
	if o.UserJWT != nil {
		if _, err := o.UserJWT(); err != nil {
			return fmt.Errorf("reading the credentials file %s: %w", c.Creds, redactErr(err))
		}
	}
	return nil
}

// CheckServerURLs checks that a comma-separated list of NATS server URLs is
// not empty and that each entry parses with a host.
func CheckServerURLs(servers string) error {
	if strings.TrimSpace(servers) == "" {
		return errors.New("no NATS server URL")
	}
	for _, p := range strings.Split(servers, ",") {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, err := url.Parse(p)
		if err != nil || u.Host == "" {
			return fmt.Errorf("NATS server URL %q does not parse", RedactURL(p))
		}
	}
	return nil
}

// CheckHostPort checks an address given as HOST:PORT, when one is given.
func CheckHostPort(flagName, addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--%s %q: %v", flagName, addr, err)
	}
	return nil
}
