package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestProbe(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "[-]nats failed: NATS connection RECONNECTING", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()

	var out, errOut bytes.Buffer
	if code := run([]string{srv.URL + "/readyz"}, &out, &errOut); code != 0 || out.String() != "ok\n" {
		t.Errorf("ready: exit %d, %q %q", code, out.String(), errOut.String())
	}
	ready.Store(false)
	out.Reset()
	errOut.Reset()
	if code := run([]string{srv.URL + "/readyz"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "503") {
		t.Errorf("not ready: exit %d, %q", code, errOut.String())
	}
	if code := run([]string{"--timeout", "1s", "http://127.0.0.1:1/readyz"}, &out, &errOut); code != 1 {
		t.Errorf("nothing listening: exit %d", code)
	}
	if code := run(nil, &out, &errOut); code != 2 {
		t.Errorf("no URL: exit %d", code)
	}
}
