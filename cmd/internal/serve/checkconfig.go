package serve

import (
	"fmt"
	"log/slog"

	"github.com/sendtwice/sendtwice/internal/cli"
)

// checkConfig finishes serve --check-config once the flags have been
// validated and the trusted approvers loaded: it checks what is left that
// needs no network and reports the configuration complete. It opens no
// connection, listener or data directory.
func checkConfig(log *slog.Logger, conn *cli.ConnConfig, httpAddr string) error {
	if err := cli.CheckHostPort("http", httpAddr); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err := conn.Check(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	log.Info("configuration complete (--check-config): nothing was started", "server", cli.RedactURL(conn.Server))
	return nil
}
