package cli

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func parseConnFlags(t *testing.T, env map[string]string, args ...string) (*ConnConfig, *flag.FlagSet) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := ConnFlagsEnv(fs, envOf(env))
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	ApplyEnv(fs)
	return c, fs
}

func TestHelpPrintsNoValueTakenFromTheEnvironment(t *testing.T) {
	env := map[string]string{"NATS_PASSWORD": "s3cret-pw", "NATS_URL": "nats://u:s3cret-url@h:4222",
		"NATS_USER": "u-env", "NATS_CREDS": "/c-env", "NATS_NKEY": "/n-env", "NATS_CERT": "/cert-env",
		"NATS_KEY": "/key-env", "NATS_CA": "/ca-env", "NATS_INBOX_PREFIX": "_INBOX_env"}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	ConnFlagsEnv(fs, envOf(env))
	if err := fs.Parse([]string{"--bogus"}); err == nil {
		t.Fatal("an unknown flag was accepted")
	}
	for k, v := range env {
		if strings.Contains(out.String(), v) {
			t.Errorf("the usage message prints $%s:\n%s", k, out.String())
		}
	}
	if !strings.Contains(out.String(), "$NATS_PASSWORD") {
		t.Errorf("the usage message does not name $NATS_PASSWORD:\n%s", out.String())
	}
}

func TestTheEnvironmentIsReadAfterParsingAndFlagsWin(t *testing.T) {
	env := map[string]string{"NATS_PASSWORD": "pw-env", "NATS_URL": "nats://env:4222", "NATS_USER": "u-env",
		"NATS_CERT": "/cert-env", "NATS_KEY": "/key-env", "NATS_CA": "/ca-env", "NATS_INBOX_PREFIX": "_INBOX_env"}
	c, _ := parseConnFlags(t, env, "--user", "u-flag")
	if c.Password != "pw-env" || c.Server != "nats://env:4222" || c.User != "u-flag" ||
		c.TLSCert != "/cert-env" || c.TLSKey != "/key-env" || c.TLSCA != "/ca-env" || c.InboxPrefix != "_INBOX_env" {
		t.Fatalf("got %+v", c)
	}
	c, _ = parseConnFlags(t, nil)
	if c.Server != DefaultServer || c.Password != "" {
		t.Fatalf("without environment: got server %q, password %q", c.Server, c.Password)
	}
}

func TestTLSFlagsAlsoTakeTheNatsCLISpellings(t *testing.T) {
	c, _ := parseConnFlags(t, map[string]string{"NATS_CA": "/ca-env"}, "--tlscert", "/c", "--tlskey", "/k", "--tlsca", "/ca")
	if c.TLSCert != "/c" || c.TLSKey != "/k" || c.TLSCA != "/ca" {
		t.Fatalf("got cert %q key %q ca %q", c.TLSCert, c.TLSKey, c.TLSCA)
	}
}

func TestAValueSetByTheCommandAfterParsingIsNotReplacedByTheEnvironment(t *testing.T) {
	c, _ := parseConnFlags(t, map[string]string{"NATS_URL": "nats://env:4222"})
	c.Server = "nats://embedded:1"
	if _, err := c.Options(); err != nil {
		t.Fatal(err)
	}
	if c.Server != "nats://embedded:1" {
		t.Fatalf("server is %q", c.Server)
	}
}

func TestAnInvalidInboxPrefixIsRefusedWithItsReason(t *testing.T) {
	for _, p := range []string{"_INBOX.>", "a.*", "a.", ".a", "a b"} {
		c, _ := parseConnFlags(t, nil, "--inbox-prefix", p)
		if _, err := c.Options(); err == nil || !strings.Contains(err.Error(), "--inbox-prefix") {
			t.Errorf("--inbox-prefix %q: got %v", p, err)
		}
	}
}

func TestACommandConnectedWithInboxPrefixGetsItsRepliesUnderThatPrefix(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(s.Shutdown)

	responder, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer responder.Close()
	replies := make(chan string, 1)
	if _, err := responder.Subscribe("svc", func(m *nats.Msg) {
		replies <- m.Reply
		_ = m.Respond([]byte("ok"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"flag", nil, []string{"--server", s.ClientURL(), "--inbox-prefix", "_INBOX_publisher"}},
		{"environment", map[string]string{"NATS_URL": s.ClientURL(), "NATS_INBOX_PREFIX": "_INBOX_publisher"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := parseConnFlags(t, tc.env, tc.args...)
			nc, err := c.Connect("test", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := nc.Request("svc", nil, 2*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := <-replies; !strings.HasPrefix(got, "_INBOX_publisher.") {
				t.Fatalf("the request's reply subject is %q", got)
			}
		})
	}
}

// A NATS server URL is shown (in a refusal, a log line or a report) without
// its password or token, query or fragment, also when it does not parse.
func TestAServerURLIsShownWithoutItsSecrets(t *testing.T) {
	const secret = "SECRET-91ad"
	for _, c := range []struct {
		name, urls string
	}{
		{"a password", "nats://alice:" + secret + "@n1:4222"},
		{"a token", "nats://" + secret + "@n1:4222"},
		{"a query", "nats://n1:4222?token=" + secret},
		{"a password in a URL that does not parse", "nats://alice:" + secret + "%zz@n1:4222"},
		{"a password in the second URL of a list", "nats://n1:4222,nats://alice:" + secret + "@n2:4222"},
	} {
		t.Run(c.name+" is not shown", func(t *testing.T) {
			if got := RedactURL(c.urls); strings.Contains(got, secret) || !strings.Contains(got, "REDACTED") {
				t.Errorf("RedactURL(%q) = %q", c.urls, got)
			}
			if err := CheckServerURLs(c.urls); err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("CheckServerURLs(%q) shows the secret: %v", c.urls, err)
			}
		})
	}
}
