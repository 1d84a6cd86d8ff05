package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/send"
)

const consoleHelp = `console [--listen HOST:PORT] [--allowed-host HOST]... [--candidates DIR] [--key FILE [--valid-for D]] [--trusted-approvers FILE] [--server URL] [--by NAME] [--wait DURATION]

Serves the approval console: a list of the candidates awaiting review, a review page with each
candidate beside the task request proposed from it (both digests shown), and an Approve button
that makes the approval, publishes it, and shows its receipt as it arrives. Pressing again
publishes the same approval again; the receipt then says replayed, with the first task.

The candidates folder holds pairs of files with one NAME: NAME.candidate.json (an
action-candidate.v1) and NAME.request.json (the task-request.v1 proposed from it). Approvals
are kept in memory while the console runs; nothing is written to the folder.

With --trusted-approvers (or $SENDTWICE_TRUSTED_APPROVERS), every send first runs the signature
and expiry checks too, as executors do, and the approver name is the one that file gives --key;
a different --by is refused. Without it, the name the key file records (publisher keygen) is
used the same way; for a key file without a name, --by defaults to $USER and must be the key's
name in the executors' file. A kept approval past its not_after is never sent.

At start it prints the address to open, with a secret token for this run: opening it lets the
browser in (a session cookie) until the console stops; every other request is refused. It answers
only to the --listen host, localhost, 127.0.0.1 and [::1] (with its port), and each --allowed-host.

Needs a running NATS server with the streams, and an executor: go run ./cmd/executor serve --embedded`

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("console", consoleHelp, stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "`HOST:PORT` to serve the console on")
	dir := fs.String("candidates", "testdata/console", "the candidates `DIR`: NAME.candidate.json + NAME.request.json pairs")
	conn := cli.ConnFlags(fs)
	by := fs.String("by", "", "the approver `NAME` the form starts with, recorded as approved_by (default: the key's name in --trusted-approvers, else $USER)")
	trustedFile := fs.String("trusted-approvers", "", "the executors' trusted-approvers `FILE`: run the signature and expiry checks before sending, and take the approver name from it (default $SENDTWICE_TRUSTED_APPROVERS)")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for each receipt")
	keyFile := fs.String("key", "", "sign approvals with the private key in `FILE` (made by publisher keygen)")
	validFor := fs.Duration("valid-for", approve.DefaultLifetime, "a signed approval's lifetime")
	var allowed hostList
	fs.Var(&allowed, "allowed-host", "also answer to `HOST` or HOST:PORT, a name the console is reached by (repeatable)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	*by = strings.TrimSpace(*by)
	byGiven := false
	fs.Visit(func(f *flag.Flag) { byGiven = byGiven || f.Name == "by" })
	if *trustedFile == "" {
		*trustedFile = os.Getenv("SENDTWICE_TRUSTED_APPROVERS")
	}
	switch {
	case *wait <= 0:
		return usageErr(fs, "--wait must be positive")
	case len(*by) > document.MaxIDBytes || !utf8.ValidString(*by):
		return usageErr(fs, "--by NAME must be valid UTF-8 of at most %d bytes", document.MaxIDBytes)
	case *trustedFile != "" && *keyFile == "":
		return usageErr(fs, "--trusted-approvers needs --key: without it the console's approvals are unsigned, and the signature check refuses every one")
	}
	var key *sign.Key
	if *keyFile != "" {
		if *validFor <= 0 || *validFor > gate.DefaultMaxLifetime {
			return usageErr(fs, "--valid-for must be positive and at most %s", gate.DefaultMaxLifetime)
		}
		var err error
		if key, err = sign.LoadKey(*keyFile); err != nil {
			return err
		}
	}
	var trusted *send.TrustedApprovers
	var owner string
	if *trustedFile != "" {
		var err error
		if trusted, err = send.LoadTrustedApprovers(*trustedFile); err != nil {
			return err
		}
		name, ok := trusted.NameOf(key.ID)
		if !ok {
			return usageErr(fs, "--key %s (key %s) is not among the trusted approvers in %s: executors would refuse every approval it signs", *keyFile, key.ID, *trustedFile)
		}
		owner = name
		switch {
		case !byGiven:
			*by = owner
		case *by != owner:
			return usageErr(fs, "--by %q: the key %s (key %s) belongs to %q in %s, and executors refuse an approval whose approved_by is not its signing key's name; give --by %q or leave --by out",
				*by, *keyFile, key.ID, owner, *trustedFile, owner)
		}
	}
	if owner == "" && key != nil && key.Name != "" {
		// The key file records its reviewer's name (publisher keygen).
		owner = key.Name
		switch {
		case !byGiven:
			*by = owner
		case *by != owner:
			return usageErr(fs, "--by %q: the key %s belongs to %q, and executors refuse an approval whose approved_by is not its signing key's name; give --by %q or leave --by out",
				*by, *keyFile, owner, owner)
		}
	}
	if !byGiven && owner == "" {
		*by = strings.TrimSpace(os.Getenv("USER"))
		if len(*by) > document.MaxIDBytes || !utf8.ValidString(*by) {
			*by = ""
		}
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usageErr(fs, "--listen %q: %v", *listen, err)
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return usageErr(fs, "--candidates %s: not a folder; point it at a folder of NAME.candidate.json + NAME.request.json pairs", *dir)
	}

	log, err := cli.NewLogger(stderr, "text", "info")
	if err != nil {
		return err
	}
	if !isLoopback(host) {
		log.Warn("the console listens beyond this machine: its address and session cookie travel unencrypted (plain HTTP)", "listen", *listen)
	}
	nc, err := conn.Connect("publisher-console", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	hosts, err := console.DefaultHosts(net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	c, err := console.New(console.Config{
		Dir:          *dir,
		JetStream:    js,
		By:           *by,
		Wait:         *wait,
		Server:       cli.RedactURL(conn.Server),
		AllowedHosts: append(hosts, allowed...),
		Key:          key,
		KeyOwner:     owner,
		Trusted:      trusted,
		Lifetime:     *validFor,
		Logger:       log,
	})
	if err != nil {
		return err
	}
	defer c.Close()

	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// Event streams end when the console closes, so that Shutdown can finish.
	srv.RegisterOnShutdown(c.Close)
	// The one place the token is shown: the reviewer opens this address.
	fmt.Fprintf(stdout, "approval console on http://%s%s (candidates in %s)\n", startHost(host, port), c.LoginPath(), *dir)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// isLoopback reports whether a listen host only accepts local connections.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startHost is the host:port of the address printed at start: the listen
// host, or 127.0.0.1 for a console listening on every address.
func startHost(host, port string) string {
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// hostList is a repeatable --allowed-host.
type hostList []string

func (l *hostList) String() string { return strings.Join(*l, ",") }

func (l *hostList) Set(v string) error {
	if err := console.CheckHost(v); err != nil {
		return err
	}
	*l = append(*l, strings.TrimSpace(v))
	return nil
}
