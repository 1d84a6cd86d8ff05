package redmine_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// apiKey stands for a real key; no error may show it.
const apiKey = "KEY-5ecre7-4d1b9c"

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// startLedger starts an embedded JetStream and opens the intent ledger in
// it (it holds the per-key locks).
func startLedger(t *testing.T) *ledger.Ledger {
	return testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
}

// request is a request for intent in the default scope with digest.
func request(intent, digest string) taskservice.Request {
	return taskservice.Request{Scope: "default", IntentID: intent, RequestDigest: digest, RequestID: "req-" + intent,
		Task: taskservice.Task{Title: "Send the minutes of " + intent}}
}

// stub is an httptest server that answers the requests Check makes as a
// Redmine would for an administrator's key (one project, the mark's field
// #7, no issues), and hands POST /issues.json to post. It is for answers a
// real Redmine cannot be made to give (5xx, a hang); it also counts the
// requests that did not carry the API key in its header.
type stub struct {
	*httptest.Server
	posts      atomic.Int32
	keyMissing atomic.Int32
	keyInURL   atomic.Int32
	post       http.HandlerFunc
}

func newStub(t *testing.T, post http.HandlerFunc) *stub {
	t.Helper()
	s := &stub{post: post}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *stub) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Redmine-API-Key") != apiKey {
		s.keyMissing.Add(1)
	}
	if strings.Contains(r.URL.String(), apiKey) {
		s.keyInURL.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case r.URL.Path == "/users/current.json":
		reply(map[string]any{"user": map[string]any{"id": 1, "login": "admin", "admin": true, "api_key": apiKey}})
	case r.URL.Path == "/projects/demo.json":
		reply(map[string]any{"project": map[string]any{"id": 3, "identifier": "demo"}})
	case r.URL.Path == "/custom_fields.json":
		reply(map[string]any{"custom_fields": []any{map[string]any{"id": 7, "name": redmine.DefaultField, "customized_type": "issue",
			"field_format": "string", "is_filter": true, "trackers": []any{map[string]any{"id": 1, "name": "Bug"}}}}})
	case r.URL.Path == "/issues.json" && r.Method == http.MethodGet:
		reply(map[string]any{"issues": []any{}, "total_count": 0, "offset": 0, "limit": 100})
	case r.URL.Path == "/issues.json" && r.Method == http.MethodPost:
		s.posts.Add(1)
		s.post(w, r)
	default:
		http.NotFound(w, r)
	}
}

// created answers a POST as Redmine does, with the mark it was sent.
func created(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Issue struct {
			Subject      string `json:"subject"`
			CustomFields []struct {
				ID    int    `json:"id"`
				Value string `json:"value"`
			} `json:"custom_fields"`
		} `json:"issue"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body) // a body that does not decode makes an issue without a subject, which the test sees
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"issue": map[string]any{"id": 41, "subject": body.Issue.Subject, "custom_fields": body.Issue.CustomFields}})
}

// adapter makes an adapter for url with the key, locks and a short
// timeout.
func adapter(t *testing.T, url string, locks taskservice.Locker, mod func(*redmine.Config)) *redmine.Adapter {
	t.Helper()
	cfg := redmine.Config{URL: url, APIKey: apiKey, Project: "demo", Locks: locks, Timeout: 2 * time.Second, LockTTL: time.Minute, LockPoll: 10 * time.Millisecond,
		RequestLifetime: time.Minute}
	if mod != nil {
		mod(&cfg)
	}
	a, err := redmine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func noKey(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), apiKey) {
		t.Errorf("%s shows the API key: %v", what, err)
	}
}
