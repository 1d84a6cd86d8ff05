package davtest

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

const todo = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//davtest//EN\r\nBEGIN:VTODO\r\nUID:probe-1\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:one task\r\nEND:VTODO\r\nEND:VCALENDAR\r\n"

func TestServers(t *testing.T) {
	for _, k := range Kinds() {
		t.Run(string(k)+" counts requests, answers and stored files from its own log and storage", func(t *testing.T) {
			t.Parallel()
			s := Start(t, k, Options{})
			path := s.ResourcePath("probe-1.ics")
			if got := s.PUTs(path); got != 0 {
				t.Fatalf("PUTs before any: %d", got)
			}
			if code := s.Put(path, []byte(todo)); code != http.StatusCreated {
				t.Fatalf("first PUT answered %d", code)
			}
			if code := s.Put(path, []byte(todo)); code/100 != 2 {
				t.Fatalf("second PUT answered %d", code)
			}
			if got, want := s.PUTs(path), 2; got != want {
				t.Errorf("PUTs in the log: %d, want %d", got, want)
			}
			// Radicale answers 201 to every successful PUT, Xandikos 204 to
			// one that replaces a resource.
			creates := s.Creates(path)
			if k == Xandikos && creates != 1 || k == Radicale && creates != 2 {
				t.Errorf("201 answers in the %s log: %d", k, creates)
			}
			if got := s.StoredNames(); len(got) != 1 || got[0] != "probe-1.ics" {
				t.Errorf("stored: %q", got)
			}

			s.Restart()
			if got := s.StoredNames(); len(got) != 1 {
				t.Errorf("stored after a restart: %q", got)
			}
			if got, want := s.PUTs(path), 2; got != want {
				t.Errorf("PUTs in the log after a restart: %d, want %d", got, want)
			}
			if code := s.Do(http.MethodGet, path, nil); code != http.StatusOK {
				t.Errorf("GET after a restart answered %d", code)
			}
			s.Stop()
			if resp, err := http.Get(s.CollectionURL); err == nil {
				resp.Body.Close()
				t.Errorf("the stopped server still answers")
			}
		})
	}
}

func TestRadicaleWithAuthentication(t *testing.T) {
	t.Parallel()
	s := Start(t, Radicale, Options{User: "alice", Password: "correct horse"})
	if code := s.Put(s.ResourcePath("a.ics"), []byte(todo)); code != http.StatusCreated {
		t.Fatalf("PUT with the right password answered %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, s.CollectionURL+"a.ics", nil)
	req.SetBasicAuth("alice", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET with a wrong password answered %d, want 401", resp.StatusCode)
	}
	log := s.tail()
	if strings.Contains(log, "correct horse") {
		t.Errorf("the password is in the server's log")
	}
}

func TestProxyDropsTheAnswerAfterTheServerHandledTheRequest(t *testing.T) {
	t.Parallel()
	s := Start(t, Xandikos, Options{})
	p := NewProxy(t, s.BaseURL)
	path := s.ResourcePath("dropped.ics")
	p.DropResponses(1)
	req, _ := http.NewRequest(http.MethodPut, p.Rewrite(s.CollectionURL)+"dropped.ics", strings.NewReader(todo))
	req.Header.Set("Content-Type", "text/calendar")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the dropped PUT got an answer: %s", resp.Status)
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Logf("the dropped PUT failed with: %v", err)
	}
	if got := s.Creates(path); got != 1 {
		t.Errorf("201 answers in the log: %d, want 1 (the server handled the PUT)", got)
	}
	if got := p.Dropped(); got != 1 {
		t.Errorf("dropped: %d", got)
	}
	resp, err = http.Get(p.Rewrite(s.CollectionURL) + "dropped.ics")
	if err != nil {
		t.Fatalf("the next request through the proxy: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET through the proxy answered %s", resp.Status)
	}
}

func TestParseLog(t *testing.T) {
	radicale := `[2026-11-30 23:59:44 +0000] [9550/Thread-3 (process_request_thread)] [INFO] PUT request for '/u/tasks/a~2Fb.ics' received from 127.0.0.1 using 'Go-http-client/1.1'
[2026-11-30 23:59:44 +0000] [9550/Thread-3 (process_request_thread)] [DEBUG] Sanitized path: '/u/tasks/a~2Fb.ics'
[2026-11-30 23:59:44 +0000] [9550/Thread-3 (process_request_thread)] [INFO] PUT response status for '/u/tasks/a~2Fb.ics' in 0.002 seconds: 201 Created
[2026-11-30 23:59:44 +0000] [9550/Thread-4 (process_request_thread)] [INFO] REPORT request for "/u/it's/" with depth '1' received from 127.0.0.1
[2026-11-30 23:59:44 +0000] [9550/Thread-4 (process_request_thread)] [INFO] REPORT response status for "/u/it's/" with depth '1' in 0.010 seconds: 207 Multi-Status
`
	got := ParseLog(Radicale, []byte(radicale))
	want := []Entry{
		{Received: true, Method: "PUT", Path: "/u/tasks/a~2Fb.ics"},
		{Status: 201, Method: "PUT", Path: "/u/tasks/a~2Fb.ics"},
		{Received: true, Method: "REPORT", Path: "/u/it's/"},
		{Status: 207, Method: "REPORT", Path: "/u/it's/"},
	}
	if len(got) != len(want) {
		t.Fatalf("radicale: %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("radicale entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	xandikos := `INFO:root:Listening on 127.0.0.1:18181
INFO:aiohttp.access:127.0.0.1 [30/Nov/2026:23:58:28 +0000] "PUT /user/calendars/tasks/a%20b.ics HTTP/1.1" 412 167 "-" "curl/7.88.1"
`
	got = ParseLog(Xandikos, []byte(xandikos))
	if len(got) != 1 || got[0] != (Entry{Received: true, Status: 412, Method: "PUT", Path: "/user/calendars/tasks/a b.ics"}) {
		t.Errorf("xandikos: %+v", got)
	}
}
