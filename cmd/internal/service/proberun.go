package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// ProbeHelp is probe's usage.
const ProbeHelp = `probe [--server URL | --embedded] [--task-service SERVICE] [--concurrency N] [--json]
      [--timeout DURATION] [--keep-tasks] --yes

Answers by experiment whether a task service is safe behind the at-least-once pipeline, where
every approval may reach it more than once. It sends a short, fixed script of create calls and
prints one row per question:

  second call, same key and body      a sequential retry: the first result again?
  same key, different body            a conflict, with the first task kept?
  N concurrent calls, one key         N calls at once (--concurrency): one create?
  a lost reply, then a retry          the reply is lost after the service acted: replayed?
  key remembered after the task is    the task is deleted, then the call retried (a service
  deleted                             that cannot delete says so)
  key scope                           as the adapter states it, checked against the store
                                      ids of all answers
  a create seen by the next lookup    for an adapter that decides a create by a lookup
                                      (Redmine): a create, then at once a lookup of its key;
                                      if it finds nothing, retries are unsafe
  two plain creates, one key          for a service with no key (Redmine): two creates without
                                      the adapter's protocol, and how many tasks they made
                                      (deleted again afterwards); for comparison, not judged

The report first states the service's class: keeps keys (the fake service), atomic
create-if-absent (CalDAV), or no key: the adapter looks up and locks (Redmine). A row that does
not arise for a class says "not applicable" and why.

Each row says how it was measured, what was seen (outcomes and task ids, and the tasks the
service counts) and whether that is safe, unsafe, a caveat or unknown (not measurable for
this service). The verdict says "safe for at-least-once delivery", or which rows make it
unsafe and what would fix them. A task created again after it was deleted is a caveat: a
late resend brings back a task the user deleted, but never makes two at once.

A service that forgets a key when its task is deleted (CalDAV, Redmine) is probed as serve runs it:
composed with the executors' intent ledger, so that the row after a deletion measures the
pair. With --server the ledger is the deployment's (the key-value bucket sendtwice-intents,
made by provision or serve; the probe's entries expire an hour and a bit after the run);
without it, a throwaway embedded NATS server in a temporary directory holds the ledger. Redmine's
per-key locks are kept in the same ledger, each for --redmine-lock-ttl (default 2 × the probe's
call timeout of 10s + 10s): the lost-reply row waits for the lock of the lost call to run out.

The probe creates real tasks. Every intent id it uses is new and starts with
"probe-<run id>-"; it never touches any other. Its tasks are in the scope sendtwice-probe, with
titles starting "[sendtwice probe] ", and it deletes them at the end (the table's cleanup line
says how many, and how many are left); --keep-tasks leaves them in place. executor verify lists
tasks left in that scope apart from the pipeline's. Before it starts it says how many calls and
tasks it will make; without --yes it prints that, sends nothing, and exits 1. With --yes, a
service that can be read without creating anything (a CalDAV collection, a Redmine project) is read once first,
so that a wrong URL or password is one error and no table.

--embedded probes a throwaway fake task service in this process (an embedded NATS server and
store in a temporary directory, removed afterwards, with faults allowed so that a reply can
be lost); nothing else needs to run. Against a running fake task service, which has no such
switch, the lost-reply row is not measured.

Exit status: 0 the verdict is safe; 1 unsafe, not proven safe, not run for want of --yes, or
an error; 2 usage.`

// ProbeConfig is probe's flags, as given.
type ProbeConfig struct {
	fs        *flag.FlagSet
	conn      *cli.ConnConfig
	ts        *Config
	emb       *bool
	conc      *int
	asJSON    *bool
	timeout   *time.Duration
	yes       *bool
	keepTasks *bool
}

// ProbeFlagsVar defines probe's flags on fs.
func ProbeFlagsVar(fs *flag.FlagSet) *ProbeConfig {
	conn := cli.ConnFlags(fs)
	ts := FlagsVar(fs)
	emb := fs.Bool("embedded", false, "probe a throwaway fake task service run in this process (needs nothing else running)")
	conc := fs.Int("concurrency", probe.DefaultConcurrency, fmt.Sprintf("`N` calls sent at once with one key, 2 to %d", probe.MaxConcurrency))
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after `DURATION` in all (each call also has its own deadline)")
	yes := fs.Bool("yes", false, "create the tasks the plan names; without it the probe only prints its plan")
	keepTasks := fs.Bool("keep-tasks", false, "leave the run's tasks in the service at the end (by default the probe deletes them)")
	return &ProbeConfig{fs: fs, conn: conn, ts: ts, emb: emb, conc: conc, asJSON: asJSON, timeout: timeout, yes: yes, keepTasks: keepTasks}
}

// Probe runs probe with its parsed flags.
func Probe(ctx context.Context, cf *ProbeConfig, stdout, stderr io.Writer) error {
	serverSet := false
	cf.fs.Visit(func(f *flag.Flag) { serverSet = serverSet || f.Name == "server" })
	if *cf.conc < 2 || *cf.conc > probe.MaxConcurrency {
		cf.fs.Usage()
		return fmt.Errorf("%w: --concurrency %d: want 2 to %d", cli.ErrUsage, *cf.conc, probe.MaxConcurrency)
	}
	if *cf.timeout <= 0 {
		cf.fs.Usage()
		return fmt.Errorf("%w: --timeout must be positive", cli.ErrUsage)
	}
	if err := cf.ts.Check(); err != nil {
		cf.fs.Usage()
		return err
	}
	if err := cf.ts.CheckCallTimeout(probe.DefaultCallTimeout); err != nil {
		cf.fs.Usage()
		return err
	}
	if *cf.emb && (serverSet || cf.ts.Kind != KindFake) {
		cf.fs.Usage()
		return fmt.Errorf("%w: --embedded runs its own fake task service; it goes with neither --server nor another --task-service", cli.ErrUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, *cf.timeout)
	defer cancel()

	svc, where, release, err := cf.ts.OpenToProbe(ctx, cf.conn, serverSet, *cf.emb, probe.DefaultCallTimeout)
	defer release()
	if err != nil {
		return err
	}
	plan, err := probe.NewPlan(svc.Target(), probe.Options{Options: servicetest.Options{Concurrency: *cf.conc}, KeepTasks: *cf.keepTasks})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "task service: %s%s\n%s\n", svc.Name, where, plan)
	if !*cf.yes {
		fmt.Fprintln(stderr, "Nothing was sent. Run again with --yes to proceed.")
		return errors.New("probe: not run: give --yes to create the tasks named above")
	}
	if err := svc.Reach(ctx); err != nil {
		return fmt.Errorf("probe: not run, nothing was created: %w", err)
	}
	rep, runErr := probe.Run(ctx, svc.Target(), plan)
	if rep != nil {
		var err error
		if *cf.asJSON {
			err = probe.WriteJSON(stdout, rep)
		} else {
			err = probe.WriteText(stdout, rep)
		}
		if err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	if !rep.Verdict.Safe {
		return cli.ErrSilent
	}
	return nil
}
