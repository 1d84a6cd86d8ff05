package main

import (
	"context"
	"flag"
	"io"

	"github.com/sendtwice/sendtwice/internal/publish"
	"github.com/sendtwice/sendtwice/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/serve"
	"github.com/sendtwice/sendtwice/internal/service"
	"github.com/sendtwice/sendtwice/internal/verify"
)

// serveFlags is serve's flag set and the configuration it fills in.
type serveFlags struct {
	fs  *flag.FlagSet
	cfg *serve.Config
}

func newServeFlags(stderr io.Writer) *serveFlags {
	fs := newFlagSet("serve", serve.Help, stderr)
	return &serveFlags{fs: fs, cfg: serve.FlagsVar(fs)}
}

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	f := newServeFlags(stderr)
	if err := parse(f.fs, args); err != nil {
		return err
	}
	return serve.Run(ctx, f.cfg, stderr)
}

func runProvision(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("provision", serve.ProvisionHelp, stderr)
	cfg := serve.ProvisionFlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return serve.Provision(ctx, cfg, stdout, stderr)
}

func runRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("redrive", redrive.Help, stderr)
	cfg := redrive.FlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return redrive.Run(ctx, cfg, stdout)
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", verify.Help, stderr)
	cfg := verify.FlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return verify.Run(ctx, cfg, stdout, stderr)
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", service.StatusHelp, stderr)
	cfg := service.StatusFlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return service.Status(ctx, cfg, stdout, stderr)
}

func runCalendars(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("calendars", service.CalendarsHelp, stderr)
	cfg := service.CalendarsFlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return service.Calendars(ctx, cfg, stdout)
}

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("send", publish.SendStoredHelp, stderr)
	cfg := publish.SendStoredFlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return publish.SendStored(ctx, cfg, stdout)
}

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("probe", service.ProbeHelp, stderr)
	cfg := service.ProbeFlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return service.Probe(ctx, cfg, stdout, stderr)
}
