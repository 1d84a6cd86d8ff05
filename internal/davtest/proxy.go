package davtest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Proxy is a loopback TCP proxy in front of a server, for losing replies.
// It reads each HTTP request from a client connection, forwards it over
// its own connection to the server and reads the whole answer, so the
// server has processed the request completely; then it passes the answer
// back, or, for a request whose answer it was told to drop, closes both
// connections without a byte of it: the client sees the connection closed
// while it waits for the answer, a lost reply. For a request whose answer
// it was told to stall, it keeps the client's connection open and silent
// until the client gives up: a reply slower than the client's timeout. A
// Hold keeps one chosen request (by method and path) from the server, or
// its answer from the client, until the test releases it: a client paused
// at a known point of its exchange. It speaks plain HTTP/1.1, so it fits
// any server (a CalDAV server, Redmine).
type Proxy struct {
	// URL is "http://127.0.0.1:<port>" of the proxy.
	URL string

	t      testing.TB
	target string // host:port
	ln     net.Listener

	mu       sync.Mutex
	drop     int
	dropTo   map[string]int // by method
	dropped  int
	stall    int
	requests int
	holds    []*Hold // armed, not yet caught
	conns    map[net.Conn]struct{}
	closing  chan struct{}
	closed   sync.Once
	wg       sync.WaitGroup
}

// NewProxy starts a proxy to the server at target (a URL or host:port); it
// is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		target = u.Host
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("davtest: proxy: %v", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), t: t, target: target, ln: ln, conns: map[net.Conn]struct{}{},
		dropTo: map[string]int{}, closing: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Rewrite returns u (a URL of the proxied server) with the proxy's host,
// so that requests to it go through the proxy.
func (p *Proxy) Rewrite(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		p.t.Fatalf("davtest: proxy: %v", err)
	}
	parsed.Host = strings.TrimPrefix(p.URL, "http://")
	return parsed.String()
}

// DropResponses makes the proxy drop the answers to the next n requests.
func (p *Proxy) DropResponses(n int) {
	p.mu.Lock()
	p.drop += n
	p.mu.Unlock()
}

// DropResponsesTo makes the proxy drop the answers to the next n requests
// with method (as DropResponses does), and pass the others on: the answer
// of a create, not of the lookup before it.
func (p *Proxy) DropResponsesTo(method string, n int) {
	p.mu.Lock()
	p.dropTo[method] += n
	p.mu.Unlock()
}

// Hold is one request the proxy keeps back, or whose answer it keeps back,
// until Release: a client paused at a known point of its exchange.
type Hold struct {
	p              *Proxy
	method, prefix string
	answer         bool
	caught         chan struct{}
	release        chan struct{}
	done           chan struct{}
	once           sync.Once
}

// HoldRequest makes the proxy keep the next request with method whose path
// starts with prefix, unforwarded, until Release: the client has sent it,
// the server has not seen it (a request slow on the network).
func (p *Proxy) HoldRequest(method, prefix string) *Hold { return p.hold(method, prefix, false) }

// HoldAnswer makes the proxy forward the next request with method whose
// path starts with prefix, read the server's whole answer, and keep it
// from the client until Release.
func (p *Proxy) HoldAnswer(method, prefix string) *Hold { return p.hold(method, prefix, true) }

func (p *Proxy) hold(method, prefix string, answer bool) *Hold {
	h := &Hold{p: p, method: method, prefix: prefix, answer: answer,
		caught: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	p.mu.Lock()
	p.holds = append(p.holds, h)
	p.mu.Unlock()
	return h
}

// Caught is closed once the proxy holds a request (or its answer).
func (h *Hold) Caught() <-chan struct{} { return h.caught }

// Release lets the held request go on: a held request is forwarded and
// Release returns once the server has answered it; a held answer is passed
// to the client. A hold that caught nothing yet is disarmed.
func (h *Hold) Release() {
	h.p.mu.Lock()
	for i, armed := range h.p.holds {
		if armed == h {
			h.p.holds = append(h.p.holds[:i:i], h.p.holds[i+1:]...)
			h.p.mu.Unlock()
			return
		}
	}
	h.p.mu.Unlock()
	h.once.Do(func() { close(h.release) })
	select {
	case <-h.done:
	case <-h.p.closing:
	}
}

// take removes and returns the first armed hold that matches req.
func (p *Proxy) take(req *http.Request) *Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.holds {
		if h.method == req.Method && strings.HasPrefix(req.URL.Path, h.prefix) {
			p.holds = append(p.holds[:i:i], p.holds[i+1:]...)
			return h
		}
	}
	return nil
}

// wait waits for h's release, or the proxy's close (false).
func (h *Hold) wait() bool {
	select {
	case <-h.release:
		return true
	case <-h.p.closing:
		return false
	}
}

// StallResponses makes the proxy hold the answers to the next n requests
// until it is closed: the server has answered, the client waits until it
// gives up (its timeout), as with a server that is slow to answer.
func (p *Proxy) StallResponses(n int) {
	p.mu.Lock()
	p.stall += n
	p.mu.Unlock()
}

// Dropped counts the answers dropped so far; Requests the requests
// forwarded.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Requests counts the requests forwarded so far.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.closed.Do(func() { close(p.closing) })
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c, true)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			defer c.Close()
			p.serve(c)
		}()
	}
}

// serve handles one client connection, with one server connection behind
// it, request by request.
func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(server, true)
	defer p.track(server, false)
	defer server.Close()
	cr, sr := bufio.NewReader(client), bufio.NewReader(server)
	for {
		req, err := http.ReadRequest(cr)
		if err != nil {
			return
		}
		h := p.take(req)
		if h != nil && !h.answer {
			close(h.caught)
			if !h.wait() {
				return
			}
		}
		if err := req.Write(server); err != nil {
			return
		}
		resp, err := http.ReadResponse(sr, req)
		if err != nil {
			return
		}
		if h != nil {
			// The server has answered: read all of it before the hold.
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if h.answer {
				close(h.caught)
				if !h.wait() {
					return
				}
			}
			close(h.done)
		}
		p.mu.Lock()
		p.requests++
		drop, stall := p.drop > 0, p.drop == 0 && p.stall > 0
		if drop {
			p.drop--
			p.dropped++
		} else if !stall && p.dropTo[req.Method] > 0 {
			p.dropTo[req.Method]--
			p.dropped++
			drop = true
		}
		if stall {
			p.stall--
		}
		p.mu.Unlock()
		if drop || stall {
			// Read the whole answer, so the server has finished; then
			// hang up on both sides (drop) or on the server only (stall).
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			server.Close()
			if stall {
				// Hold the client's connection open and silent until the
				// client gives up, or Close closes it.
				_, _ = io.Copy(io.Discard, client)
			}
			return
		}
		err = resp.Write(client)
		resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			return
		}
	}
}

// LoseReply arms the proxy to drop the answer to the next request with
// method, as the conformance suite's Target.LoseReply: its disarm takes
// the drop back if no answer was dropped.
func (p *Proxy) LoseReply(method string) func(context.Context) (func(context.Context) error, error) {
	return func(context.Context) (func(context.Context) error, error) {
		before := p.Dropped()
		p.DropResponsesTo(method, 1)
		return func(context.Context) error {
			if p.Dropped() == before {
				p.DropResponsesTo(method, -1)
			}
			return nil
		}, nil
	}
}
