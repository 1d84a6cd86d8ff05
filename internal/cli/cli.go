package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/otlp"
)

// DefaultServer is used when neither --server nor NATS_URL is given.
const DefaultServer = "nats://127.0.0.1:4222"

// LogFlags adds --log-format and --log-level to fs, shown together in its
// help under "Logging".
func LogFlags(fs *flag.FlagSet) (format, level *string) {
	format = fs.String("log-format", "text", "log `FORMAT`: text or json")
	level = fs.String("log-level", "info", "log `LEVEL`: debug, info, warn or error")
	Group(fs, "Logging", "log-format", "log-level")
	return format, level
}

// NewLogger returns a slog logger writing to w in the given format.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	if otlp.Enabled() {
		// A record logged with a traced context names its trace and span.
		h = tracing.LogHandler(h)
	}
	return slog.New(h), nil
}

// connect connects to url with natsconn.Connect, logging disconnects and
// reconnects to log when there is one.
func connect(url, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	var opts []nats.Option
	if log != nil {
		opts = append(opts,
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					log.Warn("disconnected from NATS", "err", err)
				}
			}),
			nats.ReconnectHandler(func(c *nats.Conn) { log.Info("reconnected to NATS", "url", c.ConnectedUrlRedacted()) }),
		)
	}
	return natsconn.Connect(url, name, append(opts, extra...)...)
}

// HelpOrVersion answers a command's top-level help and version: for arg
// "help", "-h", "-help" or "--help" it prints usage on stdout, for
// "version", "-version" or "--version" the command's name and Version. It
// reports whether arg was one of them.
func HelpOrVersion(name, usage, arg string, stdout io.Writer) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, name, Version())
	default:
		return false
	}
	return true
}

// Release is the version of this source tree: what every program's
// --version prints when it was built from a checkout. It changes with the
// CHANGELOG's entry of each release.
const Release = "v0.5.0"

// Version is the version the running program prints: the module version
// in its build information when that is a release tag (a build by `go
// install ...@v0.6.0`), else Release (a build from a checkout, whose build
// information says "(devel)" or a pseudo-version of the commit).
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return versionOf(bi.Main.Version)
	}
	return Release
}

// releaseTag matches a release tag, with a pre-release part ("v0.6.0",
// "v0.6.0-rc.1") but not a pseudo-version, whose suffix holds a hyphen
// ("v0.5.1-0.20261204164700-680a5f8abcde"), nor a build with "+dirty".
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)

// versionOf is the version to print for a build whose build information
// names the module version built.
func versionOf(built string) string {
	if releaseTag.MatchString(built) {
		return built
	}
	return Release
}
