package sendtest

import (
	"errors"
	"testing"
)

// A Connect that fails while the pipeline runs (its server is gone) is a
// connect error, not a failed start.
func TestAConnectFailureIsNotAStartFailure(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }() // the server is gone already: what it says is not this test's
	p.stack.Server.Shutdown()
	_, err = p.Connect()
	if !errors.Is(err, ErrConnect) || errors.Is(err, ErrStart) {
		t.Fatalf("Connect to a server that is gone: %v; want ErrConnect and not ErrStart", err)
	}
}
