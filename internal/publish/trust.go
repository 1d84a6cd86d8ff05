package publish

import (
	"flag"
	"os"

	"github.com/sendtwice/sendtwice/send"
)

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
	return send.Trusted(t, nil), true, nil
}
