package testenv

import (
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// The user of StartNoConsumers whose rights are a publisher's without any
// consumer.
const (
	PublisherUser     = "publisher"
	PublisherPassword = "publisher-test-password"
	adminUser         = "admin"
)

// PublisherPermissions are what a publisher needs to send and to wait for
// its receipts without a consumer: publish approvals, read the last stored
// receipt of a key with a direct get on RECEIPTS, subscribe to receipts and
// to replies. Everything else is refused: creating, reading or pulling a
// consumer, reading stream information, any other API call.
func PublisherPermissions() *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{topology.ApprovalsSubjects, "$JS.API.DIRECT.GET." + topology.ReceiptsStream + "." + topology.ReceiptsSubjects},
			Deny:  []string{"$JS.API.CONSUMER.>", "$JS.API.STREAM.INFO.>"},
		},
		Subscribe: &server.SubjectPermission{Allow: []string{topology.ReceiptsSubjects, "_INBOX.>"}},
	}
}

// StartNoConsumers is Start on a server with two users: clients without
// credentials connect as one that may do anything (the executors, the task
// service, the test's own connection), and PublisherUser has
// PublisherPermissions only.
func StartNoConsumers(t testing.TB) *Env {
	t.Helper()
	return StartWith(t, embedded.StackOptions{
		Users: []*server.User{
			{Username: adminUser, Password: adminUser},
			{Username: PublisherUser, Password: PublisherPassword, Permissions: PublisherPermissions()},
		},
		NoAuthUser: adminUser,
	})
}

// PublisherURL is the server's URL with PublisherUser's credentials.
func (e *Env) PublisherURL() string {
	u, err := url.Parse(e.URL())
	if err != nil {
		e.T.Fatal(err)
	}
	u.User = url.UserPassword(PublisherUser, PublisherPassword)
	return u.String()
}

// Violations records the permission violations a connection is told of.
type Violations struct {
	mu   sync.Mutex
	seen []string
}

// Handler is the connection's error handler.
func (v *Violations) Handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen = append(v.seen, err.Error())
}

// Seen returns the violations so far.
func (v *Violations) Seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.seen...)
}

// ConnectPublisher connects as PublisherUser until the test ends and
// returns a JetStream client of the connection; the returned Violations
// records what the server refused it.
func (e *Env) ConnectPublisher() (jetstream.JetStream, *Violations) {
	e.T.Helper()
	v := &Violations{}
	_, js := Connect(e.T, e.URL(), nats.UserInfo(PublisherUser, PublisherPassword), nats.Name("test-publisher"),
		nats.ErrorHandler(v.Handler))
	return js, v
}

// LimitConsumers caps the consumers of each stream of the server's account
// at n, as an operator's account limit would: the next consumer a stream
// would have beyond n is refused ("maximum consumers limit reached").
func (e *Env) LimitConsumers(n int) {
	e.T.Helper()
	err := e.Stack.Server.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": {
		MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: n, MaxAckPending: -1,
		MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1,
	}})
	if err != nil {
		e.T.Fatalf("limiting the consumers: %v", err)
	}
}
