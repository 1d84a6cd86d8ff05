package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// ConnConfig says how to reach and authenticate to NATS, as other NATS tools
// do: a server URL ($NATS_URL), and a credentials file, an nkey seed file, a
// user and password, and TLS files.
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
}

// ConnFlags adds --server and the authentication and TLS flags to fs.
// Passwords may come from $NATS_PASSWORD so they stay off command lines.
func ConnFlags(fs *flag.FlagSet) *ConnConfig {
	def := os.Getenv("NATS_URL")
	if def == "" {
		def = DefaultServer
	}
	c := AuthFlags(fs)
	fs.StringVar(&c.Server, "server", def, "NATS server `URL`s, comma-separated (default from $NATS_URL)")
	return c
}

// AuthFlags adds only the authentication and TLS flags to fs, for commands
// that define --server themselves.
func AuthFlags(fs *flag.FlagSet) *ConnConfig {
	c := &ConnConfig{}
	fs.StringVar(&c.Creds, "creds", os.Getenv("NATS_CREDS"), "user credentials `FILE` (JWT and nkey seed; default $NATS_CREDS)")
	fs.StringVar(&c.NKey, "nkey", os.Getenv("NATS_NKEY"), "nkey seed `FILE` (default $NATS_NKEY)")
	fs.StringVar(&c.User, "user", os.Getenv("NATS_USER"), "user `NAME` (default $NATS_USER)")
	fs.StringVar(&c.Password, "password", os.Getenv("NATS_PASSWORD"), "`PASSWORD` (default $NATS_PASSWORD, preferred over the flag)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "client certificate `FILE` (PEM)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "client private key `FILE` (PEM)")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "CA certificate `FILE` to verify the server (PEM)")
	fs.BoolVar(&c.TLSFirst, "tls-first", false, "start TLS before the NATS protocol handshake")
	return c
}

// Options turns the configuration into connection options.
func (c *ConnConfig) Options() ([]nats.Option, error) {
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
	return opts, nil
}

// Connect connects with the configuration under a client name.
func (c *ConnConfig) Connect(name string, log *slog.Logger) (*nats.Conn, error) {
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	return connect(c.Server, name, log, opts...)
}

// RedactURL hides any password in a server URL list.
func RedactURL(servers string) string {
	parts := strings.Split(servers, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
		} else {
			u.User = url.User("REDACTED")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

func redactErr(err error) error { return errors.New(strings.TrimSpace(err.Error())) }
