package main

import (
	"flag"
	"os"

	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// trustedEnv names the trusted-approvers file when --trusted-approvers is
// not given.
const trustedEnv = "SENDTWICE_TRUSTED_APPROVERS"

// notChecked is what a local gate without trusted approvers could not check.
const notChecked = "signature and expiry not checked: no --trusted-approvers"

// trustedApproversFlag adds --trusted-approvers to fs.
func trustedApproversFlag(fs *flag.FlagSet) *string {
	return fs.String("trusted-approvers", "", "check signature and expiry too, as executors do, against the trusted-approvers `FILE`\n(default $"+trustedEnv+"; without either, only the checks that need no keys run)")
}

// localGate returns the local gate's checker: with trusted approvers (the
// flag, else $SENDTWICE_TRUSTED_APPROVERS, read after parsing) it checks
// signatures and expiry as an executor does; without, it is nil, and
// checkLocally runs the checks that need no keys.
func localGate(flagValue string) (*gate.Checker, error) {
	path := flagValue
	if path == "" {
		path = os.Getenv(trustedEnv)
	}
	if path == "" {
		return nil, nil
	}
	kr, err := sign.LoadTrusted(path)
	if err != nil {
		return nil, err
	}
	return &gate.Checker{Keys: kr}, nil
}

// checkLocally runs the local gate on the three documents: every check with
// a checker, the checks that need no keys without one.
func checkLocally(checker *gate.Checker, candidate, request, approval []byte) (*gate.Verdict, error) {
	if checker == nil {
		return gate.CheckDocumentBindings(candidate, request, approval)
	}
	return checker.CheckDocuments(candidate, request, approval)
}
