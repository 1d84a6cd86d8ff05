package redminetest

import (
	"slices"
	"strings"
	"testing"
)

func TestParseLog(t *testing.T) {
	line := func(id, text string) string {
		return "I, [2026-12-01T21:18:44.650940 #29214]  INFO -- : [" + id + "] " + text
	}
	for _, c := range []struct {
		name string
		log  []string
		want []Request
	}{
		{"a request and its answer",
			[]string{
				line("a1", `Started POST "/issues.json" for 127.0.0.1 at 2026-12-01 21:18:44 +0000`),
				line("a1", `Processing by IssuesController#create as JSON`),
				line("a1", `Completed 201 Created in 192ms (Views: 12.0ms | ActiveRecord: 17.6ms | Allocations: 80202)`),
			},
			[]Request{{ID: "a1", Method: "POST", Target: "/issues.json", Status: 201}}},
		{"answers of interleaved requests go to their own requests",
			[]string{
				line("a1", `Started POST "/issues.json" for 127.0.0.1 at x`),
				line("b2", `Started POST "/issues.json" for 127.0.0.1 at x`),
				line("c3", `Started GET "/issues.json?cf_1=a%20b&status_id=%2A" for 127.0.0.1 at x`),
				line("b2", `Completed 422 Unprocessable Entity in 20ms`),
				line("c3", `Completed 200 OK in 5ms`),
				line("a1", `Completed 201 Created in 30ms`),
			},
			[]Request{
				{ID: "a1", Method: "POST", Target: "/issues.json", Status: 201},
				{ID: "b2", Method: "POST", Target: "/issues.json", Status: 422},
				{ID: "c3", Method: "GET", Target: "/issues.json?cf_1=a%20b&status_id=%2A", Status: 200},
			}},
		{"a request with no answer yet has status 0, and a half-written last line is not read",
			[]string{
				line("a1", `Started POST "/issues.json" for 127.0.0.1 at x`),
				line("b2", `Started DELETE "/issues/7.json" for 127.0.0.1 at x`),
				line("b2", `Completed 204 No Content in 9ms`),
				line("a1", `Completed 20`),
			},
			[]Request{
				{ID: "a1", Method: "POST", Target: "/issues.json"},
				{ID: "b2", Method: "DELETE", Target: "/issues/7.json", Status: 204},
			}},
		{"an answer with no request in the log is left out",
			[]string{line("z9", `Completed 201 Created in 1ms`)},
			nil},
		{"other lines are not requests",
			[]string{
				"=> Booting Puma",
				line("a1", `  Parameters: {"issue"=>{"subject"=>"Started POST \"/issues.json\" for 1"}}`),
			},
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ParseLog([]byte(strings.Join(c.log, "\n"))); !slices.Equal(got, c.want) {
				t.Errorf("ParseLog:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// A failure's message shows every line of the writes Redmine did not
// answer with a 2xx (the error Rails logged among them), and nothing of
// the others.
func TestFailedWritesShowsTheLinesOfWritesNotAnswered2xx(t *testing.T) {
	line := func(id, text string) string {
		return "I, [2026-12-01T21:18:44.650940 #29214]  INFO -- : [" + id + "] " + text
	}
	log := strings.Join([]string{
		line("a1", `Started POST "/issues.json" for 127.0.0.1 at x`),
		line("b2", `Started POST "/issues.json" for 127.0.0.1 at x`),
		line("c3", `Started GET "/issues.json" for 127.0.0.1 at x`),
		line("d4", `Started DELETE "/issues/7.json" for 127.0.0.1 at x`),
		"F, [2026-12-01T21:18:44.7 #29214] FATAL -- : [b2] ActiveRecord::StatementInvalid (SQLite3::BusyException: database is locked)",
		line("a1", `Completed 201 Created in 30ms`),
		line("b2", `Completed 500 Internal Server Error in 10001ms`),
		line("c3", `Completed 500 Internal Server Error in 5ms`),
	}, "\n")
	got := FailedWrites([]byte(log), 5)
	for _, want := range []string{"[b2] Started POST", "[b2] ActiveRecord::StatementInvalid", "[b2] Completed 500", "[d4] Started DELETE"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"[a1]", "[c3]"} {
		if strings.Contains(got, not) {
			t.Errorf("shows %s, a write answered 201 or a read:\n%s", not, got)
		}
	}
	if got := FailedWrites([]byte(log), 1); strings.Contains(got, "[d4]") || !strings.Contains(got, "[b2]") {
		t.Errorf("with max 1, want b2's lines only:\n%s", got)
	}
}
