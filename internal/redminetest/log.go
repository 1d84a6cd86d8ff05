package redminetest

import (
	"os"
	"regexp"
	"strconv"
	"strings"
)

var (
	// I, [2026-12-01T21:18:44.650940 #29214]  INFO -- : [dd971d71-...] Started POST "/issues.json" for 127.0.0.1 at ...
	startedLine = regexp.MustCompile(` INFO -- : \[([0-9a-f-]+)\] Started ([A-Z]+) "([^"]*)" for `)
	// I, [...]  INFO -- : [dd971d71-...] Completed 201 Created in 192ms (...)
	completedLine = regexp.MustCompile(` INFO -- : \[([0-9a-f-]+)\] Completed ([0-9]{3}) `)
)

// Request is one request in Redmine's log: its method and target (path
// and query, as sent) and the status it was answered with (0 when the log
// shows no answer).
type Request struct {
	ID     string
	Method string
	Target string
	Status int
}

// ParseLog reads the requests of a Redmine production.log, in the order
// they were received. Redmine (Rails) tags each line with the request's
// id, so answers are matched to their requests however the lines of
// concurrent requests interleave.
func ParseLog(log []byte) []Request {
	var out []Request
	at := map[string]int{}
	for _, line := range strings.Split(string(log), "\n") {
		if m := startedLine.FindStringSubmatch(line); m != nil {
			at[m[1]] = len(out)
			out = append(out, Request{ID: m[1], Method: m[2], Target: m[3]})
		} else if m := completedLine.FindStringSubmatch(line); m != nil {
			if i, ok := at[m[1]]; ok {
				out[i].Status, _ = strconv.Atoi(m[2])
			}
		}
	}
	return out
}

// Requests parses the server's log.
func (s *Server) Requests() []Request {
	s.t.Helper()
	b, err := os.ReadFile(s.LogFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		s.t.Fatalf("redminetest: reading Redmine's log: %v", err)
	}
	return ParseLog(b)
}

// Posts counts, in Redmine's own log and across restarts, the requests
// POST /issues.json received and those of them answered 201 Created: the
// creates attempted and the issues made. Rails writes a request's
// "Completed" line before its answer is sent, so once a client has its
// answer the log counts it.
func (s *Server) Posts() (received, created int) {
	s.t.Helper()
	for _, r := range s.Requests() {
		if r.Method == "POST" && (r.Target == "/issues.json" || strings.HasPrefix(r.Target, "/issues.json?")) {
			received++
			if r.Status == 201 {
				created++
			}
		}
	}
	return received, created
}

// FailedWrites is what a Redmine log says of its writes (POST, PUT, DELETE)
// that were answered with no 2xx or not at all, for a failure's message:
// every line tagged with such a request's id, for the first limit of them.
func FailedWrites(log []byte, limit int) string {
	var failed []string
	for _, r := range ParseLog(log) {
		if r.Method != "GET" && (r.Status < 200 || r.Status > 299) && len(failed) < limit {
			failed = append(failed, "["+r.ID+"]")
		}
	}
	var b strings.Builder
	for _, line := range strings.Split(string(log), "\n") {
		for _, tag := range failed {
			if strings.Contains(line, tag) {
				b.WriteString(line + "\n")
				break
			}
		}
	}
	return b.String()
}
