package main

import (
	"context"
	"fmt"
)

func (c *app) fault(ctx context.Context, args []string) error {
	fs := c.flagSet("fault", "[--server URL] --drop-replies N",
		`Arms the fault switch of a service started with --allow-faults: the replies
of the next N create calls are withheld after their effect is committed, so
callers see a lost reply and must retry. The request records of those calls
say reply_dropped. N = 0 disarms the switch. A service without
--allow-faults does not answer (no responders).
`)
	cf := c.clientFlags(fs)
	drop := fs.Int("drop-replies", -1, "number of create replies to withhold (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *drop < 0 {
		return usageErr("fault: --drop-replies N is required, N >= 0")
	}
	nc, client, err := cf.dial("fault")
	if err != nil {
		return err
	}
	defer nc.Close()
	resp, err := client.ArmFault(ctx, *drop)
	if err != nil {
		return err
	}
	if resp.DropRepliesPending == 0 {
		_, err = fmt.Fprintln(c.stdout, "fault switch disarmed: every create reply is sent")
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "fault switch armed: the next %d create replies will be withheld\n", resp.DropRepliesPending)
	return err
}
