package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// holdingServer is a CalDAV server stand-in that holds every PUT until
// release PUTs are held at once, or hold has passed since the PUT came,
// then answers 201; it counts the connections open to it and the PUTs held
// at once. Any other request is answered 503, which serve takes for a
// server not answering yet. A real server cannot be made to hold its
// answers, so this one is an httptest server.
type holdingServer struct {
	*httptest.Server
	release int
	hold    time.Duration

	mu       sync.Mutex
	changed  *sync.Cond
	open     int // connections open now
	peakOpen int
	held     int // PUTs held now
	peakHeld int
	puts     int
}

func newHoldingServer(t *testing.T, release int, hold time.Duration) *holdingServer {
	t.Helper()
	h := &holdingServer{release: release, hold: hold}
	h.changed = sync.NewCond(&h.mu)
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	h.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch s {
		case http.StateNew:
			h.open++
			h.peakOpen = max(h.peakOpen, h.open)
		case http.StateClosed, http.StateHijacked:
			h.open--
		}
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

func (h *holdingServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "held", http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	h.puts++
	h.held++
	h.peakHeld = max(h.peakHeld, h.held)
	h.changed.Broadcast()
	deadline := time.Now().Add(h.hold)
	timer := time.AfterFunc(h.hold, func() {
		h.mu.Lock()
		h.changed.Broadcast()
		h.mu.Unlock()
	})
	for h.held < h.release && time.Now().Before(deadline) {
		h.changed.Wait()
	}
	timer.Stop()
	h.held--
	h.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

// figures returns the peaks and the PUTs received.
func (h *holdingServer) figures() (peakOpen, peakHeld, puts int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peakOpen, h.peakHeld, h.puts
}

// executor serve bounds its connections to the CalDAV server: with 64
// approvals waiting and a server that holds every PUT until 64 are held at
// once, no more than caldav.DefaultMaxConns connections are ever open to
// it, and every approval still gets its task.
func TestServeOpensAtMostDefaultMaxConnsConnectionsToTheCalDAVServer(t *testing.T) {
	const deliveries = 2 * caldav.DefaultMaxConns
	env := testenv.Start(t)
	cand := scenario.Candidate()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seqs := make([]uint64, deliveries)
	for i := range deliveries {
		a, err := scenario.CalDAV.Generate(cand, "conns", i+1)
		if err != nil {
			t.Fatal(err)
		}
		sent, err := testenv.Publish(ctx, env.JS, a.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = sent.StreamSeq
	}
	srv := newHoldingServer(t, deliveries, 2*time.Second)

	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := &syncBuffer{}
	go func() {
		done <- run(serveCtx, []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--id", "exec-conns",
			"--concurrency", "256", "--call-timeout", "20s", "--ack-wait", "60s", "--log-level", "warn",
			"--task-service", "caldav", "--caldav-url", srv.URL + "/alice/tasks/"}, &bytes.Buffer{}, log)
	}()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", log.String())
		}
	}()

	byseq := awaitReceipts(t, env, seqs, 90*time.Second)
	created := 0
	for _, seq := range seqs {
		for _, rc := range byseq[seq] {
			if rc.Outcome == document.OutcomeCreated {
				created++
			}
		}
	}
	peakOpen, peakHeld, puts := srv.figures()
	t.Logf("%d approvals: %d created; the server saw %d PUTs, at most %d held at once, at most %d connections open at once",
		deliveries, created, puts, peakHeld, peakOpen)
	if peakOpen > caldav.DefaultMaxConns || peakHeld > caldav.DefaultMaxConns {
		t.Errorf("at most %d connections were open and %d PUTs held at once, want at most %d", peakOpen, peakHeld, caldav.DefaultMaxConns)
	}
	if peakHeld < caldav.DefaultMaxConns {
		t.Errorf("at most %d PUTs were held at once: the deliveries never filled the bound of %d, so the test shows nothing", peakHeld, caldav.DefaultMaxConns)
	}
	if created != deliveries {
		t.Errorf("%d created receipts, want %d", created, deliveries)
	}
	if puts < deliveries {
		t.Errorf("the server saw %d PUTs, want at least %d", puts, deliveries)
	}
}
