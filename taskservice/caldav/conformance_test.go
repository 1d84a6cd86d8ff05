package caldav_test

import (
	"context"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// The adapter keeps the contract on each CalDAV server, as a service that
// creates a name only if it is absent, with a mark key and without: the
// conformance suite's rows, with a proxy that drops the answer to a PUT
// for the lost reply and a new adapter on the same collection for the
// restart.
func TestTheAdapterPassesTheConformanceSuite(t *testing.T) {
	for _, k := range davtest.Kinds() {
		for _, key := range []struct {
			name string
			key  []byte
		}{{"", nil}, {" with a mark key", markKey}} {
			t.Run(string(k)+key.name, func(t *testing.T) {
				cfg := caldav.Config{MarkKey: key.key}
				servicetest.Run(t, func(t *testing.T) servicetest.Target {
					s := davtest.Start(t, k, davtest.Options{})
					p := davtest.NewProxy(t, s.CollectionURL)
					collection := p.Rewrite(s.CollectionURL)
					a := adapter(t, collection, cfg)
					return servicetest.Target{Name: "CalDAV on " + string(k) + key.name, Service: a, Scope: a.Scope(),
						Delete: a.DeleteTask, Find: a.Find,
						Count: servicetest.CountListed(a), LoseReply: p.LoseReply("PUT"),
						LoseReplyHow: "a proxy drops the answer to the PUT",
						Restart: func(context.Context) (taskservice.Service, error) {
							return adapter(t, collection, cfg), nil
						}}
				}, servicetest.Features{Class: servicetest.CreateIfAbsent})
			})
		}
	}
}
