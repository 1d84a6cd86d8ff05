package publish

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sendtwice/sendtwice/internal/cli"
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
