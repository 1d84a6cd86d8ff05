package redmine_test

import (
	"context"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// The adapter keeps the contract on a real Redmine, as a service with no
// key whose adapter looks up and locks: the conformance suite's rows, with
// a proxy that drops the answer to a POST for the lost reply and a new
// adapter on the same project for the restart, with a mark key as the
// executors give it. Without Redmine installed
// it is skipped (redminetest.Start says so); with CI=true it fails.
func TestTheAdapterPassesTheConformanceSuite(t *testing.T) {
	servicetest.Run(t, func(t *testing.T) servicetest.Target {
		s := redminetest.Start(t, redminetest.Options{})
		locks := startLedger(t)
		p := davtest.NewProxy(t, s.URL)
		viaProxy := func(cfg *redmine.Config) { cfg.URL = p.Rewrite(s.URL); cfg.MarkKey = markKey }
		a := onServer(t, s, locks, viaProxy)
		return servicetest.Target{Name: "Redmine", Service: a, Scope: a.Scope(),
			Delete: a.DeleteTask, Find: a.Find, Naive: a.Naive(),
			Count: servicetest.CountListed(a), LoseReply: p.LoseReply("POST"),
			LoseReplyHow: "a proxy drops the answer to the POST",
			Restart: func(context.Context) (taskservice.Service, error) {
				return onServer(t, s, locks, viaProxy), nil
			}}
	}, servicetest.Features{Class: servicetest.NoKey})
}
