package console

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

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/send"
)

// CommandHelp is the console command's usage.
const CommandHelp = `console [--listen HOST:PORT] [--allowed-host HOST]... [--candidates DIR] [--key FILE [--valid-for D]] [--trusted-approvers FILE] [--server URL] [--by NAME] [--wait DURATION] [--trace-url TEMPLATE]

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

With tracing on ($OTEL_EXPORTER_OTLP_ENDPOINT set), each press of the button starts a trace (its
first span, console approve, is the parent of the publish's); with --trace-url, each send links
to its trace, such as http://127.0.0.1:16686/trace/{trace_id} for Jaeger.

Needs a running NATS server with the streams, and an executor: go run ./cmd/executor serve --embedded`

// Flags are the console command's flags, as given.
type Flags struct {
	fs          *flag.FlagSet
	listen      *string
	dir         *string
	conn        *cli.ConnConfig
	by          *string
	trustedFile *string
	wait        *time.Duration
	keyFile     *string
	validFor    *time.Duration
	allowed     hostList
	traceURL    *string
	byGiven     bool
}

// FlagsVar defines the console command's flags on fs.
func FlagsVar(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	f.listen = fs.String("listen", "127.0.0.1:8080", "`HOST:PORT` to serve the console on")
	f.dir = fs.String("candidates", "testdata/console", "the candidates `DIR`: NAME.candidate.json + NAME.request.json pairs")
	f.conn = cli.ConnFlags(fs)
	f.by = fs.String("by", "", "the approver `NAME` the form starts with, recorded as approved_by (default: the key's name in --trusted-approvers, else $USER)")
	f.trustedFile = fs.String("trusted-approvers", "", "the executors' trusted-approvers `FILE`: run the signature, expiry and scope checks before sending, and take the approver name from it (default $SENDTWICE_TRUSTED_APPROVERS)")
	f.wait = fs.Duration("wait", 30*time.Second, "how long to wait for each receipt")
	f.keyFile = fs.String("key", "", "sign approvals with the private key in `FILE` (made by publisher keygen)")
	f.validFor = fs.Duration("valid-for", approve.DefaultLifetime, "a signed approval's lifetime")
	fs.Var(&f.allowed, "allowed-host", "also answer to `HOST` or HOST:PORT, a name the console is reached by (repeatable)")
	f.traceURL = fs.String("trace-url", "", "link each traced send to its trace at the http(s) URL `TEMPLATE`, with "+TraceIDPlaceholder+" where the trace id goes (e.g. http://127.0.0.1:16686/trace/"+TraceIDPlaceholder+" for Jaeger)")
	return f
}

// check refuses values the console cannot run with.
func (f *Flags) check() error {
	fs := f.fs
	if fs.NArg() != 0 {
		return cli.UsageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	*f.by = strings.TrimSpace(*f.by)
	fs.Visit(func(fl *flag.Flag) { f.byGiven = f.byGiven || fl.Name == "by" })
	if *f.trustedFile == "" {
		*f.trustedFile = os.Getenv("SENDTWICE_TRUSTED_APPROVERS")
	}
	switch {
	case *f.wait <= 0:
		return cli.UsageError(fs, "--wait must be positive")
	case len(*f.by) > document.MaxIDBytes || !utf8.ValidString(*f.by):
		return cli.UsageError(fs, "--by NAME must be valid UTF-8 of at most %d bytes", document.MaxIDBytes)
	case *f.trustedFile != "" && *f.keyFile == "":
		return cli.UsageError(fs, "--trusted-approvers needs --key: without it the console's approvals are unsigned, and the signature check refuses every one")
	}
	if *f.traceURL != "" {
		if err := checkTraceURL(*f.traceURL); err != nil {
			return cli.UsageError(fs, "--trace-url %q: %v; give an http or https URL with %s where the trace id goes, such as http://127.0.0.1:16686/trace/%s", *f.traceURL, err, TraceIDPlaceholder, TraceIDPlaceholder)
		}
	}
	return nil
}

// approver is who the console approves as: the signing key, the trusted
// approvers checked before each send, the key's owner, and the name the form
// starts with.
type approver struct {
	key     *sign.Key
	trusted *send.TrustedApprovers
	owner   string
	by      string
}

// approver loads the key and the trusted approvers and settles the
// approver's name: the key's owner when known (a different --by is refused),
// else --by, else $USER.
func (f *Flags) approver() (*approver, error) {
	fs := f.fs
	a := &approver{by: *f.by}
	if *f.keyFile != "" {
		if *f.validFor <= 0 || *f.validFor > gate.DefaultMaxLifetime {
			return nil, cli.UsageError(fs, "--valid-for must be positive and at most %s", gate.DefaultMaxLifetime)
		}
		var err error
		if a.key, err = sign.LoadKey(*f.keyFile); err != nil {
			return nil, err
		}
	}
	if *f.trustedFile != "" {
		var err error
		if a.trusted, err = send.LoadTrustedApprovers(*f.trustedFile); err != nil {
			return nil, err
		}
		name, ok := a.trusted.NameOf(a.key.ID)
		if !ok {
			return nil, cli.UsageError(fs, "--key %s (key %s) is not among the trusted approvers in %s: executors would refuse every approval it signs", *f.keyFile, a.key.ID, *f.trustedFile)
		}
		a.owner = name
		switch {
		case !f.byGiven:
			a.by = a.owner
		case a.by != a.owner:
			return nil, cli.UsageError(fs, "--by %q: the key %s (key %s) belongs to %q in %s, and executors refuse an approval whose approved_by is not its signing key's name; give --by %q or leave --by out",
				a.by, *f.keyFile, a.key.ID, a.owner, *f.trustedFile, a.owner)
		}
	}
	if a.owner == "" && a.key != nil && a.key.Name != "" {
		// The key file records its reviewer's name (publisher keygen).
		a.owner = a.key.Name
		switch {
		case !f.byGiven:
			a.by = a.owner
		case a.by != a.owner:
			return nil, cli.UsageError(fs, "--by %q: the key %s belongs to %q, and executors refuse an approval whose approved_by is not its signing key's name; give --by %q or leave --by out",
				a.by, *f.keyFile, a.owner, a.owner)
		}
	}
	if !f.byGiven && a.owner == "" {
		a.by = strings.TrimSpace(os.Getenv("USER"))
		if len(a.by) > document.MaxIDBytes || !utf8.ValidString(a.by) {
			a.by = ""
		}
	}
	return a, nil
}

// Run checks the parsed flags, connects, and serves the console until ctx
// ends; the address to open goes to stdout, the log to stderr.
func Run(ctx context.Context, f *Flags, stdout, stderr io.Writer) error {
	if err := f.check(); err != nil {
		return err
	}
	a, err := f.approver()
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*f.listen)
	if err != nil {
		return cli.UsageError(f.fs, "--listen %q: %v", *f.listen, err)
	}
	if st, err := os.Stat(*f.dir); err != nil || !st.IsDir() {
		return cli.UsageError(f.fs, "--candidates %s: not a folder; point it at a folder of NAME.candidate.json + NAME.request.json pairs", *f.dir)
	}

	log, err := cli.NewLogger(stderr, "text", "info")
	if err != nil {
		return err
	}
	if !isLoopback(host) {
		log.Warn("the console listens beyond this machine: its address and session cookie travel unencrypted (plain HTTP)", "listen", *f.listen)
	}
	natsConn, err := f.conn.Open("publisher-console", log)
	if err != nil {
		return err
	}
	defer natsConn.Close()
	js := natsConn.JS
	ln, err := net.Listen("tcp", *f.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	hosts, err := DefaultHosts(net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	c, err := New(Config{
		Dir:          *f.dir,
		JetStream:    js,
		By:           a.by,
		Wait:         *f.wait,
		Server:       cli.RedactURL(f.conn.Server),
		AllowedHosts: append(hosts, f.allowed...),
		Key:          a.key,
		KeyOwner:     a.owner,
		Trusted:      a.trusted,
		Lifetime:     *f.validFor,
		TraceURL:     *f.traceURL,
		Logger:       log,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	// The one place the token is shown: the reviewer opens this address.
	fmt.Fprintf(stdout, "approval console on http://%s%s (candidates in %s)\n", startHost(host, port), c.LoginPath(), *f.dir)
	return serveConsole(ctx, c, ln)
}

// serveConsole serves c on ln until ctx ends, then shuts the server down.
func serveConsole(ctx context.Context, c *Console, ln net.Listener) error {
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// Event streams end when the console closes, so that Shutdown can finish.
	srv.RegisterOnShutdown(c.Close)
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
	if err := CheckHost(v); err != nil {
		return err
	}
	*l = append(*l, strings.TrimSpace(v))
	return nil
}
