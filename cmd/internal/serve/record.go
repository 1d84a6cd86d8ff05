package serve

import (
	"log/slog"

	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/taskservice"
)

// recordTaskService wraps svc so that every call is appended to path
// (Knobs.RecordCalls), and returns a function that closes the file. With no
// path, svc is returned as it is.
func recordTaskService(path string, svc taskservice.Service, log *slog.Logger) (taskservice.Service, func(), error) {
	if path == "" {
		return svc, func() {}, nil
	}
	rec, err := history.Open(path)
	if err != nil {
		return nil, nil, err
	}
	rec.OnError = func(err error) {
		log.Error("recording task service calls: a call is missing from the file; a check of it proves nothing", "file", path, "err", err)
	}
	log.Info("recording every task service call", "file", path, "session", rec.Session())
	return rec.Wrap(svc), func() {
		if err := rec.Close(); err != nil {
			log.Warn("closing the call record", "err", err)
		}
	}, nil
}
