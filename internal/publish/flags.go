package publish

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sendtwice/sendtwice/internal/cli"
)

// readInput reads a file, or standard input for "-".
func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// requireFiles reads each named flag's file; every one is required.
func requireFiles(fs *flag.FlagSet, names map[string]*string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(names))
	for _, n := range []string{"candidate", "request", "approval"} {
		p, ok := names[n]
		if !ok {
			continue
		}
		if *p == "" {
			return nil, cli.UsageError(fs, "--%s FILE is required", n)
		}
		b, err := os.ReadFile(*p)
		if err != nil {
			return nil, fmt.Errorf("reading the %s: %w", n, err)
		}
		out[n] = b
	}
	return out, nil
}

// documentFiles are the --candidate, --request and --approval flags of a
// command that reads all three documents.
type documentFiles struct{ candidate, request, approval *string }

// documentFlags declares the three document flags on fs.
func documentFlags(fs *flag.FlagSet) documentFiles {
	return documentFiles{
		candidate: fs.String("candidate", "", "the action-candidate.v1 `FILE`"),
		request:   fs.String("request", "", "the task-request.v1 `FILE`"),
		approval:  fs.String("approval", "", "the task-approval.v1 `FILE`"),
	}
}

// readDocuments reads the documents of a command that takes the three
// documents and no argument, once its flags are parsed.
func readDocuments(fs *flag.FlagSet, d documentFiles) (map[string][]byte, error) {
	if fs.NArg() != 0 {
		return nil, cli.UsageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	return requireFiles(fs, map[string]*string{"candidate": d.candidate, "request": d.request, "approval": d.approval})
}

// scopesFlag collects a repeatable --scope: the caller scopes an approver
// may approve requests for.
type scopesFlag []string

func (s *scopesFlag) String() string { return strings.Join(*s, ",") }

func (s *scopesFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// scopeFlagUsage explains --scope wherever an approver's scopes are set.
const scopeFlagUsage = "a caller `SCOPE` the approver may approve requests for; repeat it for more, \"*\" for every scope\n(none: only the scope \"default\", where requests that name no scope land)"
