package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/sendtwice/sendtwice/internal/provider"
)

// adoptHelp explains adopt in its --help.
const adoptHelp = `Makes the store in DIR the one this deployment uses, in place of the
adopted store that --replace names.

DANGEROUS. The replaced store's intents are not in DIR. Every intent it
knew is created again, as a second task, when its approval is resent (a
publisher's resend, an executor's redelivery). Adopt another store only
when the adopted one is lost for good; if its data directory, or a copy
of it, still exists, serve that instead: a restart or a failover on the
same store needs no adoption.

A deployment records which store it uses (key "adopted" in the JetStream
key-value bucket ` + provider.AdoptionBucket + `, which has no TTL) when the
service first starts on it. serve refuses every other store for as long
as that record stands, whether or not the adopted store's instance is
alive. adopt is the way to change it: --replace must name the adopted
store (serve's refusal names it), and adopt refuses while any instance of
the service answers or holds the lease. It opens DIR (a new, empty store
if DIR holds none), so nothing may serve DIR while it runs. Then start the
service on DIR: provider serve --data DIR.

On a deployment that adopted no store yet, adopt without --replace
records the store in DIR (a first start of serve does the same by itself).
Run it where the service runs, with the service role's credentials (and its
--inbox-prefix).
`

func (c *app) adopt(ctx context.Context, args []string) error {
	fs := c.flagSet("adopt", "[--server URLS] --data DIR --replace STORE_ID [--replicas N]",
		adoptHelp)
	cf := c.commonFlags(fs)
	data := fs.String("data", "", "the `DIR` of the Pebble database to adopt (required)")
	replace := fs.String("replace", "", "the adopted `STORE_ID` (store- and 16 hex digits) that DIR replaces (required once a store is adopted)")
	replicas := fs.Int("replicas", 1, "`N` copies of the adoption bucket if adopt creates it: 3 on a three-node cluster")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *data == "" {
		return usageErr("adopt: --data is required")
	}
	if *replace != "" && !provider.ValidStoreID(*replace) {
		return usageErr("adopt: --replace %q: want a store id, store- and 16 lower-case hex digits", *replace)
	}
	if *replicas < 1 || *replicas > 5 {
		return usageErr("adopt: --replicas %d: want 1 to 5", *replicas)
	}
	log, err := cf.logger(c.stderr)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(*data)
	if err != nil {
		return fmt.Errorf("adopt: %w", err)
	}
	st, err := provider.Open(abs, provider.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("provider: opening the store: %w", err)
	}
	defer func() { _ = st.Close() }()
	nc, err := cf.open("provider adopt", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	res, err := provider.Adopt(ctx, nc.NC, st, provider.AdoptConfig{Replaces: *replace, DataDir: abs, Replicas: *replicas, Logger: log})
	if err != nil {
		return err
	}
	return c.printAdopted(st, abs, res)
}

// printAdopted says what adopt did with the store st in dir abs.
func (c *app) printAdopted(st *provider.Store, abs string, res provider.AdoptResult) error {
	counts := st.Stats()
	held := fmt.Sprintf("it holds requests received %d, creates executed %d, tasks existing %d",
		counts.RequestsReceived, counts.CreatesExecuted, counts.TasksExisting)
	var err error
	switch {
	case !res.Changed:
		_, err = fmt.Fprintf(c.stdout, "nothing changed: %s is already the adopted store of this deployment\n  %s\n  %s\n",
			st.ID(), res.Adopted, held)
	case res.Replaced == nil:
		_, err = fmt.Fprintf(c.stdout, "adopted %s (%s) as this deployment's store; no store was adopted before\n  %s\n"+
			"Every other store is now refused until it is replaced with provider adopt.\nNext: provider serve --data %s\n",
			st.ID(), abs, held, abs)
	default:
		old := res.Replaced.StoreID
		_, err = fmt.Fprintf(c.stdout, "adopted %s (%s) as this deployment's store, replacing %s\n"+
			"  replaced: %s\n  %s\n"+
			"DANGER: %s does not know the intents %s knew. Every one of them is created again,\n"+
			"as a second task, when its approval is resent. %s is now refused.\n"+
			"Next: provider serve --data %s\n",
			st.ID(), abs, old, res.Replaced, held, st.ID(), old, old, abs)
	}
	return err
}
