// Package sendtest runs the whole pipeline inside an application's own
// tests, as net/http/httptest runs an HTTP server: an embedded NATS server
// with JetStream on a free loopback port, the fake task service over a
// Pebble store, and one executor that trusts a throwaway reviewer, all in
// the test's process and its temporary directory.
//
//	func TestSendTwice(t *testing.T) {
//		p := sendtest.Start(t)
//		js, err := p.Connect()
//		approved, err := p.Approve(candidate, request)
//		env, err := send.Build(send.Documents{Candidate: candidate, Request: request, Approval: approved})
//		_, receipt, err := send.NewClient(js).Send(ctx, env)
//		counts, err := p.Counts(ctx)
//	}
//
// The pipeline is the one the commands run (the same stack, service and
// executor), with the executor's gate as strict as in production: it
// accepts approvals signed by the kit's reviewer (Reviewer, Approve) in any
// scope, for the fake task service's default destination, and nothing
// unsigned. Trusted gives the same trust to send.Trusted for a local check.
// Start ties everything to a testing.TB; New and Close are for code that
// has none (an Example, a TestMain). Everything listens on loopback only,
// and nothing (a process, a server, a file) is left behind once the test,
// or Close, is done.
package sendtest
