package publish

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/send"
)

// checkResult is check's --json output.
type checkResult struct {
	Result          string `json:"result"`
	Check           string `json:"check,omitempty"`
	Path            string `json:"path,omitempty"`
	Reason          string `json:"reason,omitempty"`
	CandidateDigest string `json:"candidate_digest,omitempty"`
	RequestDigest   string `json:"request_digest,omitempty"`
	// SignedBy names the trusted approver whose signature was checked.
	SignedBy string `json:"signed_by,omitempty"`
	// NotChecked says, on a pass without trusted approvers, what was not checked.
	NotChecked string `json:"not_checked,omitempty"`
}

// CheckHelp is check's usage.
const CheckHelp = "check --candidate F --request F --approval F [--trusted-approvers FILE] [--json]\n\nRuns the gate's checks in order (envelope, approval_format, signature, expiry,\ncandidate_binding, request_binding, capability) and prints pass, or the check that failed\nwith its path and reason. Signature and expiry need the executors' trusted-approvers file\n(--trusted-approvers or $SENDTWICE_TRUSTED_APPROVERS); without it they are skipped and\nthe pass says so. Exit status: 0 pass, 1 a check failed, 2 usage."

// CheckConfig is check's flags, as given.
type CheckConfig struct {
	fs       *flag.FlagSet
	docFlags documentFiles
	asJSON   *bool
	trusted  *string
}

// CheckFlagsVar defines check's flags on fs.
func CheckFlagsVar(fs *flag.FlagSet) *CheckConfig {
	docFlags := documentFlags(fs)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	trusted := trustedApproversFlag(fs)
	return &CheckConfig{fs: fs, docFlags: docFlags, asJSON: asJSON, trusted: trusted}
}

// Check runs check with its parsed flags.
func Check(cf *CheckConfig, stdout io.Writer) error {
	files, err := readDocuments(cf.fs, cf.docFlags)
	if err != nil {
		return err
	}
	check, withKeys, err := localCheck(*cf.trusted)
	if err != nil {
		return err
	}
	v, err := check.Documents(send.Documents{Candidate: files["candidate"], Request: files["request"], Approval: files["approval"]})
	var res checkResult
	var refused *send.Refusal
	switch {
	case err == nil:
		res = checkResult{Result: "pass", CandidateDigest: v.CandidateDigest, RequestDigest: v.RequestDigest, SignedBy: v.SignedBy}
		if !withKeys {
			res.NotChecked = NotChecked
		}
	case errors.As(err, &refused):
		res = checkResult{Result: "fail", Check: refused.Check, Path: refused.Path, Reason: refused.Reason}
	default:
		return err
	}
	if *cf.asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
	} else if res.Result == "pass" {
		switch {
		case res.NotChecked != "":
			fmt.Fprintf(stdout, "pass (%s)\n", res.NotChecked)
		case res.SignedBy != "":
			fmt.Fprintf(stdout, "pass (signed by trusted approver %s)\n", res.SignedBy)
		default:
			fmt.Fprintf(stdout, "pass\n")
		}
		fmt.Fprintf(stdout, "candidate %s\nrequest   %s\n", res.CandidateDigest, res.RequestDigest)
	} else {
		fmt.Fprintf(stdout, "fail: %s at %s: %s\n", res.Check, res.Path, res.Reason)
	}
	if res.Result != "pass" {
		return &cli.ExitError{Code: cli.ExitFailure, Err: cli.ErrSilent}
	}
	return nil
}

// DigestHelp is digest's usage.
const DigestHelp = "digest [--canonical] FILE|-\n\nPrints the canonical digest (sha256: + hex of SHA-256 over RFC 8785 JSON) of a JSON document,\nor with --canonical its canonical bytes. - reads standard input. A number that JCS would round\n(more digits than a double holds, such as 9007199254740993) is refused, as the executors refuse it."

// DigestConfig is digest's flags, as given.
type DigestConfig struct {
	fs        *flag.FlagSet
	canonical *bool
}

// DigestFlagsVar defines digest's flags on fs.
func DigestFlagsVar(fs *flag.FlagSet) *DigestConfig {
	canonical := fs.Bool("canonical", false, "print the canonical JSON bytes instead of the digest")
	return &DigestConfig{fs: fs, canonical: canonical}
}

// Digest runs digest with its parsed flags.
func Digest(cf *DigestConfig, stdin io.Reader, stdout io.Writer) error {
	if cf.fs.NArg() != 1 {
		return cli.UsageError(cf.fs, "digest takes exactly one FILE (or - for standard input)")
	}
	data, err := readInput(cf.fs.Arg(0), stdin)
	if err != nil {
		return fmt.Errorf("reading %s: %w", cf.fs.Arg(0), err)
	}
	if *cf.canonical {
		out, err := canon.CanonicalizeExact(data)
		if err != nil {
			return fmt.Errorf("canonicalising %s: %w", cf.fs.Arg(0), err)
		}
		_, err = stdout.Write(out)
		return err
	}
	d, err := canon.DigestExact(data)
	if err != nil {
		return fmt.Errorf("digesting %s: %w", cf.fs.Arg(0), err)
	}
	_, err = fmt.Fprintln(stdout, d)
	return err
}

// ApproveHelp is approve's usage.
const ApproveHelp = "approve --candidate F --request F (--by NAME | --key FILE) [--valid-for DURATION] [--id ID] [-o FILE]\n\nWrites a task-approval.v1 that binds the candidate (id, digest, source version) and the\nrequest (id, digest) and grants the capability of the request's provider (create_fake_task for\nfake-task-provider.v1, create_caldav_task for caldav-task.v1, create_redmine_issue for\nredmine-issue.v1). Refuses when the request does not point\nat that candidate. With --key, signs it (Ed25519) and sets\nnot_after; --by then defaults to the reviewer's name recorded in the key file (publisher\nkeygen), and another name is refused, as executors would refuse it. Executors refuse\nunsigned approvals unless run with --insecure-allow-unsigned. Without a signature,\napproved_by is a label for audits, not a proof of identity. Says on standard error which request,\nintent, provider and destination (where the task will be made: default when the request names\nnone; only an executor serving that destination carries it out), capability and caller scope (the request's scope, default when it names none) it approved; the\napproval binds the scope, and executors accept a signed approval only from an approver their\ntrusted approvers allow that scope (publisher keygen --scope, publisher trust)."

// ApproveConfig is approve's flags, as given.
type ApproveConfig struct {
	fs       *flag.FlagSet
	cand     *string
	req      *string
	by       *string
	id       *string
	out      *string
	keyFile  *string
	validFor *time.Duration
}

// ApproveFlagsVar defines approve's flags on fs.
func ApproveFlagsVar(fs *flag.FlagSet) *ApproveConfig {
	cand := fs.String("candidate", "", "the action-candidate.v1 `FILE`")
	req := fs.String("request", "", "the task-request.v1 `FILE`")
	by := fs.String("by", "", "the approver's `NAME`, recorded as approved_by (with --key: the key's recorded name)")
	id := fs.String("id", "", "the approval `ID` (default: derived from the request digest and the time)")
	out := fs.String("o", "", "write the approval to `FILE` instead of standard output")
	keyFile := fs.String("key", "", "sign with the private key in `FILE` (made by publisher keygen)")
	validFor := fs.Duration("valid-for", approve.DefaultLifetime, "a signed approval's lifetime: not_after = now + `DURATION`")
	return &ApproveConfig{fs: fs, cand: cand, req: req, by: by, id: id, out: out, keyFile: keyFile, validFor: validFor}
}

// Approve runs approve with its parsed flags.
func Approve(cf *ApproveConfig, stdout, stderr io.Writer) error {
	if cf.fs.NArg() != 0 {
		return cli.UsageError(cf.fs, "unexpected argument %q", cf.fs.Arg(0))
	}
	switch {
	case strings.TrimSpace(*cf.by) == "" && *cf.keyFile == "":
		return cli.UsageError(cf.fs, "--by NAME is required")
	case len(*cf.by) > document.MaxIDBytes || !utf8.ValidString(*cf.by):
		return cli.UsageError(cf.fs, "--by NAME must be valid UTF-8 of at most %d bytes", document.MaxIDBytes)
	case *cf.id != "" && !document.ValidID(*cf.id):
		return cli.UsageError(cf.fs, "--id %q: an approval id is 1 to %d bytes without spaces, control or format characters", *cf.id, document.MaxIDBytes)
	}
	files, err := requireFiles(cf.fs, map[string]*string{"candidate": cf.cand, "request": cf.req})
	if err != nil {
		return err
	}
	opts := approve.Options{By: *cf.by, ID: *cf.id}
	if *cf.keyFile != "" {
		if *cf.validFor <= 0 || *cf.validFor > gate.DefaultMaxLifetime {
			return cli.UsageError(cf.fs, "--valid-for must be positive and at most %s", gate.DefaultMaxLifetime)
		}
		if opts.Key, err = sign.LoadKey(*cf.keyFile); err != nil {
			return err
		}
		if opts.Key.Name == "" {
			if opts.By == "" {
				return cli.UsageError(cf.fs, "--by NAME is required: %s records no reviewer name (it was made before keygen recorded names)", *cf.keyFile)
			}
			fmt.Fprintf(stderr, "publisher: %s records no reviewer name, so --by %q is not checked against it; executors accept the approval only if their trusted-approvers file names key %s %q\n",
				*cf.keyFile, opts.By, opts.Key.ID, opts.By)
		} else if err := opts.Key.CheckSigner(opts.By); opts.By != "" && err != nil {
			return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("refusing --by %q: %w", opts.By, err)}
		}
		opts.Lifetime = *cf.validFor
	}
	a, b, err := approve.Write(files["candidate"], files["request"], opts)
	if err != nil {
		return err
	}
	describeApproval(stderr, a, files["request"])
	if *cf.out == "" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(*cf.out, b, 0o644); err != nil {
		return fmt.Errorf("writing the approval: %w", err)
	}
	return nil
}

// describeApproval tells the reviewer, on standard error, what was approved:
// the request and its intent in their caller scope, which the approval binds
// (executors accept a signed approval only from an approver their trusted
// approvers allow that scope), and where the task will be made: the
// provider and destination, and the capability granted for them.
func describeApproval(w io.Writer, a *document.Approval, request []byte) {
	scope, intent, provider, destination := document.DefaultScope, "?", "?", document.DefaultDestination
	if v, err := document.Parse(request); err == nil {
		if r, err := document.DecodeRequest("$", v); err == nil {
			scope, intent, provider, destination = r.KeyScope(), r.IntentID, r.Provider, r.DestinationName()
		}
	}
	fmt.Fprintf(w, "publisher: approved request %s (intent %s) in scope %s, as %s by %s\n", a.Request.RequestID, intent, scope, a.ApprovalID, a.ApprovedBy)
	fmt.Fprintf(w, "publisher: approved for provider %s, destination %s (capability %s): only an executor serving that destination makes the task\n",
		provider, destination, strings.Join(a.Capabilities, ", "))
	if a.Signed() {
		fmt.Fprintf(w, "publisher: executors accept it until %s if their trusted approvers let %s approve scope %s\n", a.NotAfter, a.ApprovedBy, scope)
	}
}

// TrustedEnv names the trusted-approvers file when --trusted-approvers is
// not given.
const TrustedEnv = "SENDTWICE_TRUSTED_APPROVERS"

// NotChecked is what a local gate without trusted approvers could not check.
const NotChecked = "signature, expiry and scope not checked: no --trusted-approvers"

// trustedApproversFlag adds --trusted-approvers to fs.
func trustedApproversFlag(fs *flag.FlagSet) *string {
	return fs.String("trusted-approvers", "", "check signature, expiry and scope too, as executors do, against the trusted-approvers `FILE`\n(default $"+TrustedEnv+"; without either, only the checks that need no keys run)")
}

// localCheck returns the local gate's check: with trusted approvers (the
// flag, else $SENDTWICE_TRUSTED_APPROVERS, read after parsing) every check
// an executor runs, signature, expiry and scope included; without, the checks that
// need no keys. trusted says which.
func localCheck(flagValue string) (c send.Check, trusted bool, err error) {
	path := flagValue
	if path == "" {
		path = os.Getenv(TrustedEnv)
	}
	if path == "" {
		return send.Bindings(), false, nil
	}
	t, err := send.LoadTrustedApprovers(path)
	if err != nil {
		return send.Check{}, false, err
	}
	return send.Trusted(t), true, nil
}

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

// writeNew writes each file in dir, made if missing, and returns their
// paths. Unless force, it writes none when any exists, and names the first
// that does by name.
func writeNew(dir string, force bool, files map[string][]byte) (map[string]string, error) {
	paths := make(map[string]string, len(files))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		paths[name] = filepath.Join(dir, name)
		if _, err := os.Lstat(paths[name]); err == nil && !force {
			return nil, fmt.Errorf("%s exists: keep it, or give --force to replace it; nothing written", paths[name])
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making %s: %w", dir, err)
	}
	for name, b := range files {
		if err := os.WriteFile(paths[name], b, 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", paths[name], err)
		}
	}
	return paths, nil
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

// approverEntryFlags is the flags keygen and trust share: the approver's
// name, its trusted-approvers file and the scopes its entry allows.
type approverEntryFlags struct {
	fs      *flag.FlagSet
	name    *string
	trusted *string
	scopes  *scopesFlag
}

// approverEntryFlagsVar defines the shared flags on fs, with the usages of
// --name and --trusted that the command gives.
func approverEntryFlagsVar(fs *flag.FlagSet, nameUsage, trustedUsage string) approverEntryFlags {
	name := fs.String("name", "", nameUsage)
	trusted := fs.String("trusted", "", trustedUsage)
	scopes := new(scopesFlag)
	fs.Var(scopes, "scope", scopeFlagUsage)
	return approverEntryFlags{fs: fs, name: name, trusted: trusted, scopes: scopes}
}

// KeygenConfig is keygen's flags, as given.
type KeygenConfig struct {
	approverEntryFlags
	dir *string
}

// KeygenFlagsVar defines keygen's flags on fs.
func KeygenFlagsVar(fs *flag.FlagSet) *KeygenConfig {
	entry := approverEntryFlagsVar(fs,
		"the reviewer's `NAME`, used for the file names and in the trusted-approvers entry",
		"add this key to the trusted-approvers `FILE` (made if missing)")
	dir := fs.String("dir", ".", "`DIR` to write the key files in")
	return &KeygenConfig{approverEntryFlags: entry, dir: dir}
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
	approverEntryFlags
	defaultOnly *bool
}

// TrustFlagsVar defines trust's flags on fs.
func TrustFlagsVar(fs *flag.FlagSet) *TrustConfig {
	entry := approverEntryFlagsVar(fs, "the approver's `NAME` in the file", "the trusted-approvers `FILE` to change")
	defaultOnly := fs.Bool("default-scope-only", false, "remove the entry's scopes: it may approve only the scope \"default\"")
	return &TrustConfig{approverEntryFlags: entry, defaultOnly: defaultOnly}
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
