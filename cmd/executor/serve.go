package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/topology"
)

const serveHelp = `serve [--server URL | --embedded] [--data DIR] [--listen HOST:PORT] [--concurrency N]

Consumes the APPROVALS stream through the shared durable consumer "executor". For each
delivery: strict parse and gate, call the task service (keyed by intent id), store the
receipt, then ack. Streams and the consumer are created at start if missing.

With --embedded, also runs a NATS server with JetStream (store under --data, fsync before
every ack) listening on --listen, and the fake task service (Pebble under --data), so one
command runs everything. More instances join with: executor serve --server nats://HOST:PORT

SIGINT/SIGTERM stops pulling, finishes the deliveries in flight, drains the connection and
exits; a second signal exits at once.`

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", serveHelp, stderr)
	server := cli.ServerFlag(fs)
	emb := fs.Bool("embedded", false, "run a NATS server and the task service in this process")
	data := fs.String("data", "sendtwice-data", "`DIR` for the embedded server's JetStream store and the task service's Pebble store")
	listen := fs.String("listen", "127.0.0.1:4222", "`HOST:PORT` the embedded NATS server listens on")
	allowFaults := fs.Bool("allow-faults", false, "embedded task service: accept fault-switch calls (tests and demos only)")
	conc := fs.Int("concurrency", 32, "deliveries handled at once by this instance")
	id := fs.String("id", "", "instance `ID` named in receipts (default host-pid)")
	callTimeout := fs.Duration("call-timeout", 5*time.Second, "how long one call to the task service may take")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "consumer AckWait: a delivery not acked in this time comes back")
	maxDeliver := fs.Int("max-deliver", 5, "consumer MaxDeliver: deliveries before a message is dead-lettered")
	var faults []executor.FaultSpec
	fs.Func("fault", "inject a fault, for tests only: `POINT:ACTION[:PROBABILITY]`, POINT after-call, after-receipt or before-ack,\nACTION kill or stall=DURATION; without a probability it fires once (repeatable)", func(s string) error {
		f, err := executor.ParseFault(s)
		faults = append(faults, f)
		return err
	})
	logFormat, logLevel := cli.LogFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *conc < 1 || *conc > 4096 {
		return fmt.Errorf("%w: --concurrency %d: want 1 to 4096", errUsage, *conc)
	}
	if *maxDeliver < 2 {
		return fmt.Errorf("%w: --max-deliver %d: want at least 2 so that a redelivery can happen", errUsage, *maxDeliver)
	}
	log, err := cli.NewLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	if len(faults) > 0 {
		log.Warn("FAULT INJECTION IS ON: this instance will crash or stall on purpose", "faults", len(faults))
	}
	url := *server
	if *emb {
		host, portStr, err := net.SplitHostPort(*listen)
		if err != nil {
			return fmt.Errorf("%w: --listen %q: %v", errUsage, *listen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return fmt.Errorf("%w: --listen %q: port must be a number", errUsage, *listen)
		}
		st, err := embedded.StartStack(embedded.StackOptions{Dir: *data, Host: host, Port: port, AllowFaults: *allowFaults, Logger: log})
		if err != nil {
			return err
		}
		defer func() {
			if err := st.Close(); err != nil {
				log.Warn("stopping the embedded server", "err", err)
			}
		}()
		url = st.URL()
		log.Info("embedded NATS server and task service running", "url", url, "data", *data, "sync", "always")
	}

	nc, err := cli.Connect(url, "executor", log)
	if err != nil {
		return err
	}
	ex, err := executor.New(nc, executor.Config{
		ID:          *id,
		Concurrency: *conc,
		CallTimeout: *callTimeout,
		Topology:    topology.Config{AckWait: *ackWait, MaxDeliver: *maxDeliver},
		Logger:      log,
		Fault:       executor.Faults(faults, log),
	})
	if err != nil {
		nc.Close()
		return err
	}
	runErr := ex.Run(ctx, nil)
	if err := drain(nc); err != nil {
		log.Warn("draining the connection", "err", err)
	}
	return runErr
}
