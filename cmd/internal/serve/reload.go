package serve

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sendtwice/sendtwice/internal/sign"
)

// reloadTrustedOnHangup reloads the trusted approvers from path into keys on
// every SIGHUP, until stop is called: revoking or adding a reviewer needs no
// restart. Every check that starts after a reload uses the new approvers.
func reloadTrustedOnHangup(path string, keys *sign.Keyring, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = ReloadTrusted(path, keys, log)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// ReloadTrusted reads the trusted-approvers file again and, if it loads,
// makes keys trust exactly its approvers, logging which were added and
// removed. A file that does not load changes nothing: the approvers loaded
// before stay trusted, and the error is logged.
func ReloadTrusted(path string, keys *sign.Keyring, log *slog.Logger) error {
	next, err := sign.LoadTrusted(path)
	if err != nil {
		log.Error("reloading the trusted approvers failed; the approvers loaded before stay trusted",
			"file", path, "err", err, "approvers", keys.Len())
		return err
	}
	added, removed := keys.Replace(next)
	log.Info("trusted approvers reloaded", "file", path, "approvers", keys.Len(),
		"added", describeApprovers(added), "removed", describeApprovers(removed))
	return nil
}

// describeApprovers names approvers with their keys and the scopes they
// may approve, for the log.
func describeApprovers(as []sign.Approver) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.Name+" ("+a.KeyID+", scopes "+strings.Join(a.ScopeList(), ",")+")")
	}
	return out
}
