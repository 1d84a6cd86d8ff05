package caldav

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

func TestNewRefusesABadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no URL", Config{}, "CollectionURL is empty"},
		{"a relative URL", Config{CollectionURL: "/alice/tasks/"}, "scheme must be http or https"},
		{"another scheme", Config{CollectionURL: "ftp://dav.example/tasks/"}, "scheme must be http or https"},
		{"no host", Config{CollectionURL: "http:///tasks/"}, "names no host"},
		{"a password in the URL", Config{CollectionURL: "https://alice:secret@dav.example/tasks/"}, "must not carry a user or password"},
		{"a query", Config{CollectionURL: "https://dav.example/tasks/?x=1"}, "query or a fragment"},
		{"a fragment", Config{CollectionURL: "https://dav.example/tasks/#x"}, "query or a fragment"},
		{"a colon in the user", Config{CollectionURL: "https://dav.example/tasks/", Username: "a:b"}, "Username must not contain"},
		{"a password without a user", Config{CollectionURL: "https://dav.example/tasks/", Password: "secret"}, "Username is empty"},
		{"a negative timeout", Config{CollectionURL: "https://dav.example/tasks/", Timeout: -time.Second}, "Timeout"},
		{"a negative connection bound", Config{CollectionURL: "https://dav.example/tasks/", MaxConns: -1}, "MaxConns"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "caldav: ") {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

func TestStoreIDIsTheNormalizedCollection(t *testing.T) {
	ids := map[string]bool{}
	for _, u := range []string{"https://DAV.example:443/alice/tasks", "https://dav.example/alice/tasks/", "https://dav.example/alice//tasks/./"} {
		a, err := New(Config{CollectionURL: u})
		if err != nil {
			t.Fatal(err)
		}
		if a.CollectionURL() != "https://dav.example/alice/tasks/" {
			t.Errorf("%s normalizes to %s", u, a.CollectionURL())
		}
		ids[a.StoreID()] = true
		if !strings.HasPrefix(a.StoreID(), "caldav-") || len(a.StoreID()) != len("caldav-")+16 {
			t.Errorf("store id %q", a.StoreID())
		}
		if a.Scope() != "each caller scope, in the collection https://dav.example/alice/tasks/" {
			t.Errorf("scope %q", a.Scope())
		}
	}
	if len(ids) != 1 {
		t.Errorf("one collection, several store ids: %v", ids)
	}
	other, _ := New(Config{CollectionURL: "https://dav.example/bob/tasks/"})
	if ids[other.StoreID()] {
		t.Errorf("two collections, one store id")
	}
}

func TestStatusClassification(t *testing.T) {
	a, err := New(Config{CollectionURL: "https://dav.example/alice/tasks/", Username: "alice", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := a.resourceURL(taskservice.DefaultScope, "intent-1")
	for _, c := range []struct {
		code      int
		put       bool
		permanent bool
		says      string
	}{
		{500, true, false, "500"},
		{502, true, false, "502"},
		{503, true, false, "503"},
		{507, true, false, "507"},
		{408, true, false, "408"},
		{429, true, false, "429"},
		{401, true, true, `credentials of user "alice" were refused`},
		{403, true, true, `user "alice" may not write`},
		{404, true, true, "does not exist"},
		{409, true, true, "does not exist"},
		{301, true, true, "not followed"},
		{400, true, true, "400"},
		{415, true, true, "415"},
	} {
		resp := &http.Response{StatusCode: c.code, Status: fmt.Sprintf("%d %s", c.code, http.StatusText(c.code)), Header: http.Header{}}
		err := a.statusError("PUT", target, resp, c.put)
		if taskservice.IsPermanent(err) != c.permanent || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), fmt.Sprint(c.code)) {
			t.Errorf("%d: %v (permanent %v); want permanent %v, saying %q", c.code, err, taskservice.IsPermanent(err), c.permanent, c.says)
		}
		if !c.permanent && !errors.Is(err, taskservice.ErrTransient) {
			t.Errorf("%d: not marked transient: %v", c.code, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%d: the error shows the password", c.code)
		}
	}
}
