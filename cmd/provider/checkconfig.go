package main

import (
	"log/slog"

	sharedcli "github.com/sendtwice/sendtwice/internal/cli"
)

// checkServeConfig finishes serve --check-config once the flags have been
// validated: it checks what is left that needs no network and reports the
// configuration complete. It opens no connection, listener or database.
func checkServeConfig(log *slog.Logger, cf *common, httpAddr string) error {
	if err := sharedcli.CheckHostPort("http", httpAddr); err != nil {
		return usageErr("serve: %v", err)
	}
	cf.auth.Server = cf.server
	if err := cf.auth.Check(); err != nil {
		return usageErr("serve: %v", err)
	}
	log.Info("configuration complete (--check-config): nothing was started", "server", sharedcli.RedactURL(cf.server))
	return nil
}
