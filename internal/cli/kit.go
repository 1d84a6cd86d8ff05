package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sendtwice/sendtwice/internal/tracing/otlp"
)

// Exit statuses every command shares; a command may add its own above
// ExitUsage (publisher's receipt outcomes).
const (
	ExitOK      = 0
	ExitFailure = 1 // an error
	ExitUsage   = 2 // bad flags or arguments
	// ExitSecondSignal is the status of a process stopped at once by a
	// second SIGINT or SIGTERM (128 + SIGINT, as a shell reports it).
	ExitSecondSignal = 130
)

// ErrUsage marks a command line that cannot be run: exit status ExitUsage.
var ErrUsage = errors.New("usage")

// ErrSilent marks a failure whose explanation was already printed.
var ErrSilent = errors.New("already reported")

// ExitError carries a process exit status with its cause.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the exit status for the error a command returned: 0 for none
// or for --help, an ExitError's own status, ExitUsage for a usage error,
// else ExitFailure.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitFailure
}

// Report prints err on stderr as "prog: err", unless there is nothing to
// say: no error, --help, or a failure already explained (ErrSilent). It
// returns the exit status (ExitCode).
func Report(prog string, err error, stderr io.Writer) int {
	var ee *ExitError
	msg := err
	if errors.As(err, &ee) {
		msg = ee.Err
	}
	if msg != nil && !errors.Is(msg, flag.ErrHelp) && !errors.Is(msg, ErrSilent) {
		// An error of the package named like the program already starts
		// with its name: say it once.
		text := msg.Error()
		if !strings.HasPrefix(text, prog+": ") {
			text = prog + ": " + text
		}
		fmt.Fprintln(stderr, text)
	}
	return ExitCode(err)
}

// Main is the whole of a command's main: it runs run with a context that
// ends at the first SIGINT or SIGTERM (a second one exits at once), reports
// the error run returns and exits with its status.
//
// Tracing is on for the run when the environment asks for it (package
// otlp): the process is the service "sendtwice-" + prog unless
// OTEL_SERVICE_NAME names it, and its spans are flushed before it exits.
func Main(prog string, run func(ctx context.Context) error) {
	ctx, stop := SignalContext(prog, os.Stderr)
	stopTracing, err := otlp.Start(ctx, "sendtwice-"+prog)
	if err == nil {
		err = run(ctx)
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if ferr := stopTracing(flush); ferr != nil {
			fmt.Fprintf(os.Stderr, "%s: flushing traces: %v\n", prog, ferr)
		}
		cancel()
	}
	stop()
	os.Exit(Report(prog, err, os.Stderr))
}

// SignalContext returns a context that ends at the first SIGINT or SIGTERM;
// the command then shuts down in order and says so in its log. A second
// signal exits the process at once with ExitSecondSignal, saying so on
// stderr. stop releases the signals.
func SignalContext(prog string, stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			// The command says it is shutting down in its own log, whose
			// format (--log-format json) a plain line here would break.
			cancel()
		case <-done:
			return
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "%s: %v again: exiting at once\n", prog, sig)
			os.Exit(ExitSecondSignal)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// NewFlagSet returns a flag set named name that reports errors instead of
// exiting; its usage prints header and then the flags (PrintFlags).
func NewFlagSet(name, header string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), header)
		PrintFlags(fs.Output(), fs)
	}
	return fs
}

// Parse parses args and then takes the environment's values of the flags
// that fall back to it (ApplyEnv). --help is flag.ErrHelp; any other error
// is a usage error that Report does not print again: the flag package has
// printed it, with the usage.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w: %v", ErrUsage, ErrSilent, err)
	}
	ApplyEnv(fs)
	return nil
}

// ParseOrHelp is Parse for a command whose --help is success: it returns help
// true and no error when args ask for the usage (which the flag set has
// printed); other errors are Parse's.
func ParseOrHelp(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// ParseNoArgs is Parse for a command that takes no positional arguments:
// one is a usage error, after the usage is printed.
func ParseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	return nil
}

// UsageError prints fs's usage and returns a usage error (exit status 2)
// saying what was wrong.
func UsageError(fs *flag.FlagSet, format string, args ...any) error {
	fs.Usage()
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}
