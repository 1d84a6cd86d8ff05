package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/ledger"
)

// TakeMarkKey reads the deployment's mark key from the intent ledger's
// bucket on js for a kind whose adapter tags its tasks (CalDAV, Redmine),
// so that Open gives it to the adapters. A command that creates tasks
// (serve, probe) passes create: the first to serve makes the key, creating
// or updating the bucket first when ProvisionLedger. A command that only
// lists (verify, status) passes false: a deployment with no key yet has no
// tagged task, and its tasks are listed as they are. It does nothing for
// the fake task service, which keeps its keys itself.
func (f *Config) TakeMarkKey(ctx context.Context, js jetstream.JetStream, create bool) error {
	if !f.NeedsLedger() {
		return nil
	}
	if create && f.ProvisionLedger {
		if err := ledger.Ensure(ctx, js, max(f.LedgerReplicas, 1)); err != nil {
			return err
		}
	}
	key, err := ledger.MarkKey(ctx, js, create)
	if !create && (errors.Is(err, ledger.ErrNoMarkKey) || errors.Is(err, ledger.ErrNoBucket)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the deployment's mark key: %w", err)
	}
	f.markKey = key
	return nil
}
