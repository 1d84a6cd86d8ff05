package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/redact"
)

// ConnConfig says how to reach and authenticate to NATS, as other NATS tools
// do: a server URL ($NATS_URL), and a credentials file, an nkey seed file, a
// user and password, TLS files, and the prefix of reply subjects.
type ConnConfig struct {
	Server   string
	Creds    string
	NKey     string
	User     string
	Password string
	TLSCert  string
	TLSKey   string
	TLSCA    string
	TLSFirst bool
	// InboxPrefix replaces "_INBOX" in the subjects of this connection's
	// replies, so that permissions can give each role its own inbox.
	InboxPrefix string

	env []*envString // flags falling back to the environment
}

// ConnFlags adds --server and the authentication and TLS flags to fs, shown
// together in its help under "NATS connection".
// Values from the environment ($NATS_URL, $NATS_PASSWORD and the others
// named in each flag's help) are read after parsing, by ApplyEnv or at the
// latest by Options and Connect, so --help never prints them.
func ConnFlags(fs *flag.FlagSet) *ConnConfig {
	return ConnFlagsEnv(fs, os.Getenv)
}

// ConnFlagsEnv is ConnFlags reading the environment through getenv.
func ConnFlagsEnv(fs *flag.FlagSet, getenv func(string) string) *ConnConfig {
	c := &ConnConfig{}
	add := func(p *string, env string, names []string, usage string) {
		c.env = append(c.env, envStringVar(fs, getenv, p, env, "", names, usage))
	}
	add(&c.Creds, "NATS_CREDS", []string{"creds"}, "user credentials `FILE` (JWT and nkey seed; default $NATS_CREDS)")
	add(&c.NKey, "NATS_NKEY", []string{"nkey"}, "nkey seed `FILE` (default $NATS_NKEY)")
	add(&c.User, "NATS_USER", []string{"user"}, "user `NAME` (default $NATS_USER)")
	add(&c.Password, "NATS_PASSWORD", []string{"password"}, "`PASSWORD` (default $NATS_PASSWORD, preferred over the flag, which other local users can see)")
	c.env[len(c.env)-1].secret = true
	add(&c.TLSCert, "NATS_CERT", []string{"tls-cert", "tlscert"}, "client certificate `FILE` (PEM; default $NATS_CERT)")
	add(&c.TLSKey, "NATS_KEY", []string{"tls-key", "tlskey"}, "client private key `FILE` (PEM; default $NATS_KEY)")
	add(&c.TLSCA, "NATS_CA", []string{"tls-ca", "tlsca"}, "CA certificate `FILE` to verify the server (PEM; default $NATS_CA)")
	fs.BoolVar(&c.TLSFirst, "tls-first", false, "start TLS before the NATS protocol handshake")
	add(&c.InboxPrefix, "NATS_INBOX_PREFIX", []string{"inbox-prefix"}, "subject `PREFIX` of this client's replies instead of _INBOX, for permissions that give each role its own inbox (default $NATS_INBOX_PREFIX)")
	c.env = append(c.env, envStringVar(fs, getenv, &c.Server, "NATS_URL", DefaultServer, []string{"server"},
		"NATS server `URL`s, comma-separated (default $NATS_URL, else "+DefaultServer+")"))
	Group(fs, "NATS connection", "server", "creds", "nkey", "user", "password", "tls-cert", "tls-key", "tls-ca", "tls-first", "inbox-prefix")
	return c
}

// AuthFlagNames are the names of the authentication and TLS flags ConnFlags
// defines: what a server without either (an embedded one) refuses.
var AuthFlagNames = []string{"creds", "nkey", "user", "password", "tls-cert", "tlscert", "tls-key", "tlskey",
	"tls-ca", "tlsca", "tls-first"}

// applyEnv fills the fields whose flags were not given from the environment,
// once.
func (c *ConnConfig) applyEnv() {
	for _, v := range c.env {
		v.apply()
	}
}

// Options turns the configuration into connection options.
func (c *ConnConfig) Options() ([]nats.Option, error) {
	c.applyEnv()
	var opts []nats.Option
	n := 0
	if c.Creds != "" {
		n++
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.NKey != "" {
		n++
		o, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("reading the nkey seed file %s: %w", c.NKey, redactErr(err))
		}
		opts = append(opts, o)
	}
	if c.User != "" || c.Password != "" {
		n++
		if c.User == "" {
			return nil, errors.New("a password needs --user")
		}
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if n > 1 {
		return nil, errors.New("give one of --creds, --nkey, or --user/--password")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	if c.InboxPrefix != "" {
		if p := c.InboxPrefix; strings.ContainsAny(p, "*> \t") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
			return nil, fmt.Errorf("--inbox-prefix %q: want a subject without wildcards, spaces or empty tokens, such as _INBOX_publisher", p)
		}
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	return opts, nil
}

// Connect connects with the configuration under a client name, reconnecting
// without limit after the first connection (and saying so on log, when not
// nil); extra options come last.
func (c *ConnConfig) Connect(name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	return connect(c.Server, name, log, append(opts, extra...)...)
}

// Conn is a command's connection to NATS with its JetStream handle (Open).
type Conn struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	log *slog.Logger
}

// Open connects as Connect does and opens JetStream on the connection: what
// a command that reads or writes the streams starts with. Close it when
// done.
func (c *ConnConfig) Open(name string, log *slog.Logger, extra ...nats.Option) (*Conn, error) {
	nc, err := c.Connect(name, log, extra...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return &Conn{NC: nc, JS: js, log: log}, nil
}

// OpenWithin opens the connection as Open does (with no logger), for a
// command that does its work within timeout: it returns the connection, ctx
// bounded by timeout, and done, which cancels that context and then closes
// the connection. Defer done when the open succeeds.
func (c *ConnConfig) OpenWithin(ctx context.Context, name string, timeout time.Duration) (*Conn, context.Context, func(), error) {
	conn, err := c.Open(name, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return conn, ctx, func() { cancel(); conn.Close() }, nil
}

// Close drains the connection (natsconn.Drain), so that whatever was handed
// to it goes out before it closes; it is closed when Close returns. A drain
// that fails is told to the logger given to Open, if any.
func (c *Conn) Close() {
	if err := natsconn.Drain(c.NC, 0); err != nil && c.log != nil {
		c.log.Warn("draining the connection", "err", err)
	}
}

// RedactURL shows a server URL list without what may be secret: passwords
// (or tokens) in the user information, queries and fragments (see
// redact.URL).
func RedactURL(servers string) string { return redact.URLs(servers) }

func redactErr(err error) error { return errors.New(strings.TrimSpace(err.Error())) }

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
