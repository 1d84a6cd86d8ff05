package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/natsconn"
)

// closers releases what was taken, last first.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// OpenToProbe opens the service as executor probe measures it: able to
// lose a reply (LoseReplies), and, for a service that forgets deleted keys
// (CalDAV, Redmine), composed with an intent ledger, which also holds
// Redmine's locks: the deployment's on the NATS server of conn when
// serverSet, else a throwaway embedded server's. With embedded, the fake
// task service is a throwaway one started in this process, with faults
// allowed. It returns the service, where it is (for the plan's first
// line), and what releases all it took; release is never nil.
func (f *Config) OpenToProbe(ctx context.Context, conn *cli.ConnConfig, serverSet, embeddedFake bool, callTimeout time.Duration) (svc *Service, where string, release func(), err error) {
	var taken closers
	if f.Kind == KindFake {
		where = " over NATS at " + cli.RedactURL(conn.Server)
	}
	if embeddedFake {
		if err := startProbedFake(conn, &taken); err != nil {
			return nil, "", taken.close, err
		}
		where = ", embedded in this process and thrown away afterwards"
	}
	var ledgerNC *nats.Conn
	var ledgerWhere string
	if f.NeedsLedger() {
		if ledgerNC, f.ProvisionLedger, ledgerWhere, err = probeLedgerConn(conn, serverSet, &taken); err != nil {
			return nil, "", taken.close, fmt.Errorf("probe: opening the intent ledger: %w", err)
		}
		f.LedgerReplicas = 1
		js, err := jetstream.New(ledgerNC)
		if err == nil {
			err = f.TakeMarkKey(ctx, js, true)
		}
		if err != nil {
			return nil, "", taken.close, fmt.Errorf("probe: %w", err)
		}
	}
	f.LoseReplies = true
	svc, err = f.Open(ctx, func() (*nats.Conn, error) {
		if ledgerNC != nil {
			return ledgerNC, nil
		}
		nc, err := conn.Connect("executor-probe", nil)
		if err == nil {
			taken.add(nc.Close)
		}
		return nc, err
	}, callTimeout)
	if err != nil {
		return nil, "", taken.close, fmt.Errorf("probe: opening the task service: %w", err)
	}
	if ledgerNC != nil {
		js, err := jetstream.New(ledgerNC)
		if err == nil {
			_, err = svc.KeepDeletedKeys(ctx, js, f.ProvisionLedger, 1)
		}
		if err != nil {
			return nil, "", taken.close, fmt.Errorf("probe: opening the intent ledger: %w", err)
		}
		where += "; intent ledger: " + ledgerWhere
	}
	return svc, where, taken.close, nil
}

// startProbedFake starts a throwaway fake task service in this process
// (an embedded NATS server and store in a temporary directory, with faults
// allowed) and points conn at it.
func startProbedFake(conn *cli.ConnConfig, taken *closers) error {
	dir, err := os.MkdirTemp("", "sendtwice-probe-")
	if err != nil {
		return fmt.Errorf("probe: making a temporary directory: %w", err)
	}
	taken.add(func() { _ = os.RemoveAll(dir) })
	st, err := embedded.StartStack(embedded.StackOptions{Dir: dir, Port: -1, AllowFaults: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("probe: starting the embedded fake task service: %w", err)
	}
	taken.add(func() { _ = st.Close() })
	conn.Server = st.URL()
	return nil
}

// probeLedgerConn connects to the NATS server that holds the probe's
// intent ledger: the deployment's (serverSet: found, not provisioned), or
// else a throwaway embedded server in a temporary directory (provisioned).
// It says where the ledger is.
func probeLedgerConn(conn *cli.ConnConfig, serverSet bool, taken *closers) (nc *nats.Conn, provision bool, where string, err error) {
	if serverSet {
		nc, err = conn.Connect("executor-probe-ledger", nil)
		if err != nil {
			return nil, false, "", err
		}
		taken.add(nc.Close)
		return nc, false, ledger.Bucket + " over NATS at " + cli.RedactURL(conn.Server), nil
	}
	dir, err := os.MkdirTemp("", "sendtwice-probe-ledger-")
	if err != nil {
		return nil, false, "", fmt.Errorf("making a temporary directory: %w", err)
	}
	taken.add(func() { _ = os.RemoveAll(dir) })
	srv, err := embedded.Start(embedded.Options{Dir: dir, Host: "127.0.0.1", Port: -1})
	if err != nil {
		return nil, false, "", fmt.Errorf("starting an embedded NATS server: %w", err)
	}
	taken.add(srv.Shutdown)
	nc, err = natsconn.Connect(srv.ClientURL(), "executor-probe-ledger")
	if err != nil {
		return nil, false, "", err
	}
	taken.add(nc.Close)
	return nc, true, "embedded in this process and thrown away afterwards", nil
}
