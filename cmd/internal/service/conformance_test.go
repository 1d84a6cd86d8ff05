package service_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// The fake task service keeps the contract as a service that keeps its
// keys: the conformance suite's rows against the test stack, as the
// probe reaches it (service.Service.Target), with its fault switch for the
// lost reply and a stop and start of the service on its store for the
// restart.
func TestTheFakeTaskServicePassesTheConformanceSuite(t *testing.T) {
	servicetest.Run(t, func(t *testing.T) servicetest.Target {
		env := testenv.Start(t)
		cfg := service.Config{Kind: service.KindFake, LoseReplies: true}
		svc, err := cfg.Open(t.Context(), func() (*nats.Conn, error) { return env.NC, nil }, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		target := svc.Target().Suite()
		target.Restart = func(context.Context) (taskservice.Service, error) {
			if err := env.Stack.StopService(); err != nil {
				return nil, err
			}
			return svc.Service, env.Stack.StartService(filepath.Join(env.Dir, "provider"))
		}
		return target
	}, servicetest.Features{Class: servicetest.KeepsKeys})
}
