package publish

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/sign"
)

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
