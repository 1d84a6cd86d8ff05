package caldav_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// Neither CalDAV server under test redirects, so two small HTTP servers
// stand in: the collection's server answers every request with a redirect
// to another server, which must never see a request, let alone the
// password.
func TestARedirectIsNotFollowedAndThePasswordStaysWithTheCollectionsServer(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer other.Close()
	collection := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer collection.Close()

	a := adapter(t, collection.URL+"/alice/tasks/", caldav.Config{Username: "alice", Password: "s3cret"})
	_, err := a.Create(context.Background(), request("intent-redirected", "redirected"))
	if !taskservice.IsPermanent(err) || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("Create: %v; want a permanent error naming the redirect", err)
	}
	if _, err := a.Tasks(context.Background()); !taskservice.IsPermanent(err) {
		t.Errorf("Tasks: %v; want a permanent error", err)
	}
	if err := a.Delete(context.Background(), "intent-redirected"); !taskservice.IsPermanent(err) {
		t.Errorf("Delete: %v; want a permanent error", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other server got %d requests", n)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
}
