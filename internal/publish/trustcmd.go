package publish

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// TrustHelp is trust's usage.
const TrustHelp = `trust --trusted FILE --name NAME (--scope SCOPE... | --default-scope-only)

Sets the caller scopes for which the approver NAME of the executors' trusted-approvers FILE may
approve requests, keeping every other entry as it is. Each --scope names one scope ("*" for
every scope); --default-scope-only removes the entry's scopes, which allows only the scope
"default", where requests that name no scope land. Executors read the file at start and on
SIGHUP (executor serve), and refuse an approval for a scope its approver may not approve at
the check scope. Refuses an unknown NAME and an unusable scope, changing nothing.`

// TrustConfig is trust's flags, as given.
type TrustConfig struct {
	fs          *flag.FlagSet
	trusted     *string
	name        *string
	scopes      *scopesFlag
	defaultOnly *bool
}

// TrustFlagsVar defines trust's flags on fs.
func TrustFlagsVar(fs *flag.FlagSet) *TrustConfig {
	trusted := fs.String("trusted", "", "the trusted-approvers `FILE` to change")
	name := fs.String("name", "", "the approver's `NAME` in the file")
	scopes := new(scopesFlag)
	fs.Var(scopes, "scope", scopeFlagUsage)
	defaultOnly := fs.Bool("default-scope-only", false, "remove the entry's scopes: it may approve only the scope \"default\"")
	return &TrustConfig{fs: fs, trusted: trusted, name: name, scopes: scopes, defaultOnly: defaultOnly}
}

// Trust runs trust with its parsed flags.
func Trust(cf *TrustConfig, stdout io.Writer) error {
	switch {
	case cf.fs.NArg() != 0:
		return cli.UsageError(cf.fs, "unexpected argument %q", cf.fs.Arg(0))
	case *cf.trusted == "":
		return cli.UsageError(cf.fs, "--trusted FILE is required")
	case *cf.name == "":
		return cli.UsageError(cf.fs, "--name NAME is required")
	case len(*cf.scopes) == 0 && !*cf.defaultOnly:
		return cli.UsageError(cf.fs, "give the scopes (--scope SCOPE, repeated) or --default-scope-only")
	case len(*cf.scopes) > 0 && *cf.defaultOnly:
		return cli.UsageError(cf.fs, "--scope and --default-scope-only exclude each other")
	}
	var list []string
	if !*cf.defaultOnly {
		if err := sign.CheckScopes("--scope", *cf.scopes); err != nil {
			return cli.UsageError(cf.fs, "%v", err)
		}
		list = *cf.scopes
	}
	a, err := sign.SetScopes(*cf.trusted, *cf.name, list)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s (key %s) may approve the scopes %s in %s\n", a.Name, a.KeyID, strings.Join(a.ScopeList(), ", "), *cf.trusted)
	return nil
}
