package publish

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// KeygenHelp is keygen's usage.
const KeygenHelp = `keygen --name NAME [--dir DIR] [--trusted FILE] [--scope SCOPE]...

Makes a reviewer's Ed25519 key pair: DIR/NAME.key (the private key, file mode 0600; never
share it) and DIR/NAME.pub, both recording NAME, the name approvals signed with the key must
give as approved_by (publisher approve --key refuses another). Prints the entry to add to the
executors' trusted-approvers file ({"approvers": [ ... ]}); with --trusted FILE, adds it to
that file, keeping the approvers it already names (and makes the file if there is none).
Refuses to overwrite an existing key, and a NAME the trusted file already gives another key.
NAME is 1 to 64 letters, digits, dots, underscores or dashes, starting with a letter or digit.
Each --scope names a caller scope whose requests the reviewer may approve ("*" for every
scope); without --scope the entry names none, which allows only the scope "default", where
requests that name no scope land. Executors refuse an approval for another scope at the
check scope. 'publisher trust' changes the scopes of an entry later.`

// KeygenConfig is keygen's flags, as given.
type KeygenConfig struct {
	fs      *flag.FlagSet
	name    *string
	dir     *string
	trusted *string
	scopes  *scopesFlag
}

// KeygenFlagsVar defines keygen's flags on fs.
func KeygenFlagsVar(fs *flag.FlagSet) *KeygenConfig {
	name := fs.String("name", "", "the reviewer's `NAME`, used for the file names and in the trusted-approvers entry")
	dir := fs.String("dir", ".", "`DIR` to write the key files in")
	trusted := fs.String("trusted", "", "add this key to the trusted-approvers `FILE` (made if missing)")
	scopes := new(scopesFlag)
	fs.Var(scopes, "scope", scopeFlagUsage)
	return &KeygenConfig{fs: fs, name: name, dir: dir, trusted: trusted, scopes: scopes}
}

// Keygen runs keygen with its parsed flags.
func Keygen(cf *KeygenConfig, stdout io.Writer) error {
	if cf.fs.NArg() != 0 {
		return cli.UsageError(cf.fs, "unexpected argument %q", cf.fs.Arg(0))
	}
	if !sign.ValidName(*cf.name) {
		return cli.UsageError(cf.fs, "--name %q: use 1 to 64 letters, digits, dots, underscores or dashes, starting with a letter or a digit", *cf.name)
	}
	if len(*cf.scopes) > 0 {
		if err := sign.CheckScopes("--scope", *cf.scopes); err != nil {
			return cli.UsageError(cf.fs, "%v", err)
		}
	}
	// Refuse a name the trusted file already has before making any key.
	if *cf.trusted != "" {
		existing, err := sign.ReadTrusted(*cf.trusted)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, a := range existing {
			if strings.EqualFold(a.Name, *cf.name) {
				return fmt.Errorf("%s already names an approver %q (key %s); choose another --name, or remove that entry first", *cf.trusted, a.Name, a.KeyID)
			}
		}
	}
	if err := os.MkdirAll(*cf.dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", *cf.dir, err)
	}
	k, err := sign.Generate()
	if err != nil {
		return err
	}
	entry, err := sign.WriteKeyPair(*cf.dir, *cf.name, k)
	if err != nil {
		return err
	}
	if len(*cf.scopes) > 0 {
		entry.Scopes = *cf.scopes
	}
	if *cf.trusted != "" {
		if err := sign.AddTrusted(*cf.trusted, entry); err != nil {
			return fmt.Errorf("adding the key to the trusted approvers: %w", err)
		}
	}
	b, _ := json.MarshalIndent(entry, "", "  ")
	fmt.Fprintf(stdout, "wrote %s/%s.key (private, mode 0600) and %s/%s.pub\nkey id %s\ntrusted-approvers entry:\n%s\n", *cf.dir, *cf.name, *cf.dir, *cf.name, entry.KeyID, b)
	if *cf.trusted != "" {
		fmt.Fprintf(stdout, "added to %s\n", *cf.trusted)
	}
	return nil
}

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
