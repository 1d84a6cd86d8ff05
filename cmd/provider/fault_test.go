package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/provider"
)

// The fault subcommand and serve's --allow-faults exist only in this
// package's tests: the production program has no flag or subcommand that
// only tests need.
func init() {
	testOnly.allowFaults = func(fs *flag.FlagSet) *bool {
		return fs.Bool("allow-faults", false, "register the fault endpoint (tests only)")
	}
	testOnly.subcommands = map[string]func(*app, context.Context, []string) error{"fault": (*app).fault}
}

// fault arms the fault switch of a service started with --allow-faults: the
// replies of the next N create calls are withheld after their effect is
// committed; N = 0 disarms it.
func (c *app) fault(ctx context.Context, args []string) error {
	fs := c.flagSet("fault", "[--server URL] --drop-replies N", "Arms the fault switch of a service started with --allow-faults.\n")
	cf := c.clientFlags(fs)
	drop := fs.Int("drop-replies", -1, "number of create replies to withhold (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *drop < 0 {
		return usageErr("fault: --drop-replies N is required, N >= 0")
	}
	nc, client, err := cf.dial("fault")
	if err == nil {
		defer nc.Close()
		var resp provider.FaultResponse
		if resp, err = client.ArmFault(ctx, *drop); err == nil {
			_, err = fmt.Fprintf(c.stdout, "fault switch armed: the next %d create replies will be withheld\n", resp.DropRepliesPending)
		}
	}
	return err
}
