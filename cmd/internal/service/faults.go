package service

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
)

// errReplyLost is what a call whose reply was dropped on purpose returns.
var errReplyLost = errors.New("the reply was lost on purpose after the server answered")

// faults returns next, or, for a Config that asks for lost replies
// (LoseReplies: the probe, the demo, tests), next wrapped by a lossy
// transport that s.LoseReply arms for requests of method. serve's calls
// never pass through one.
func (s *Service) faults(f *Config, method string, next http.RoundTripper) http.RoundTripper {
	if !f.LoseReplies {
		return next
	}
	lossy := &lossyTransport{method: method, next: next}
	s.LoseReply = lossy.arm
	return lossy
}

// lossyTransport passes requests on; while drop is positive, it lets the
// server answer a request of method (a PUT, a POST), then drops the answer
// and returns errReplyLost.
type lossyTransport struct {
	method string
	next   http.RoundTripper
	drop   atomic.Int64
}

// arm drops the answer of the next request of t's method (a Service's
// LoseReply); disarm undoes it if no such request came.
func (t *lossyTransport) arm(context.Context) (func(context.Context) error, error) {
	t.drop.Store(1)
	return func(context.Context) error { t.drop.Store(0); return nil }, nil
}

func (t *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != t.method {
		return resp, err
	}
	for {
		n := t.drop.Load()
		if n <= 0 {
			return resp, nil
		}
		if t.drop.CompareAndSwap(n, n-1) {
			resp.Body.Close()
			return nil, errReplyLost
		}
	}
}
