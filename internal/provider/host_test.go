package provider

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestHostServesAndStopClosesConnectionAndStore(t *testing.T) {
	url := startNATS(t)
	dir := t.TempDir()
	var conn *nats.Conn
	h, err := Host(dir, Options{Logger: quietLogger()}, ServiceConfig{Logger: quietLogger()}, func() (*nats.Conn, error) {
		var err error
		conn, err = nats.Connect(url)
		return conn, err
	})
	if err != nil {
		t.Fatalf("host: %v", err)
	}
	client := NewClient(connect(t, url))
	resp, err := client.Create(ctxT(t), newRequest("intent-host", "check items"))
	if err != nil || resp.Outcome != OutcomeCreated {
		t.Fatalf("create: %+v, %v", resp, err)
	}
	if err := h.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !conn.IsClosed() {
		t.Error("the service's connection is open after Stop")
	}
	// The store is closed: another host may open the directory at once.
	h2, err := Host(dir, Options{Logger: quietLogger()}, ServiceConfig{Logger: quietLogger()}, func() (*nats.Conn, error) { return nats.Connect(url) })
	if err != nil {
		t.Fatalf("hosting the store again: %v", err)
	}
	if c := h2.Store.Stats(); c != counts(1, 1, 1) {
		t.Errorf("counts after a restart %+v", c)
	}
	if err := h2.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestHostThatCannotConnectLeavesTheStoreClosed(t *testing.T) {
	dir := t.TempDir()
	refused := errors.New("no server")
	_, err := Host(dir, Options{Logger: quietLogger()}, ServiceConfig{}, func() (*nats.Conn, error) { return nil, refused })
	if !errors.Is(err, refused) {
		t.Fatalf("host: %v, want the connect error", err)
	}
	st, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("the store is still held: %v", err)
	}
	_ = st.Close()
}
