package main

import (
	"log/slog"

	"github.com/sendtwice/sendtwice/internal/cli"
)

// checkServeConfig finishes serve --check-config once the flags have been
// validated: it checks what is left that needs no network and reports the
// configuration complete. It opens no connection, listener or database.
func checkServeConfig(log *slog.Logger, cf *common, httpAddr string) error {
	if err := cli.CheckHostPort("http", httpAddr); err != nil {
		return usageErr("serve: %v", err)
	}
	if err := cf.conn.Check(); err != nil {
		return usageErr("serve: %v", err)
	}
	log.Info("configuration complete (--check-config): nothing was started", "server", cli.RedactURL(cf.conn.Server))
	return nil
}
