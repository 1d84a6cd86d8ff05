package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/publish"
)

func runDigest(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("digest", publish.DigestHelp, stderr)
	cfg := publish.DigestFlagsVar(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	return publish.Digest(cfg, stdin, stdout)
}

func runApprove(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approve", publish.ApproveHelp, stderr)
	cfg := publish.ApproveFlagsVar(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	return publish.Approve(cfg, stdout, stderr)
}

func runCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", publish.CheckHelp, stderr)
	cfg := publish.CheckFlagsVar(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	return publish.Check(cfg, stdout)
}

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("send", publish.SendHelp, stderr)
	cfg := publish.SendFlagsVar(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	return publish.Send(ctx, cfg, stdout, stderr)
}

func runKeygen(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keygen", publish.KeygenHelp, stderr)
	cfg := publish.KeygenFlagsVar(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	return publish.Keygen(cfg, stdout)
}

func runTrust(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trust", publish.TrustHelp, stderr)
	cfg := publish.TrustFlagsVar(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	return publish.Trust(cfg, stdout)
}

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("console", console.CommandHelp, stderr)
	cfg := console.FlagsVar(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	return console.Run(ctx, cfg, stdout, stderr)
}

// newFlagSet returns a flag set that reports errors instead of exiting, with
// a usage text of its own.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlagSet(name, "Usage: publisher "+synopsis+"\n\n", stderr)
}

// parseFlags parses args; --help is success, other errors are usage errors.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}
