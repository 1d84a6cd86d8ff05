package linearize_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/internal/linearize"
)

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

var epoch = time.Unix(1_800_000_000, 0)

func at(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }

// answered is a call from ms sent to ms returned, answered with outcome
// and task.
func answered(intent, digest string, sent, returned int, outcome, task string) history.Call {
	return history.Call{ID: intent + "/" + outcome + "/" + task, IntentID: intent, RequestDigest: digest,
		Sent: at(sent), Returned: at(returned), Answered: true, Outcome: outcome, TaskID: task}
}

// pending is a call sent at ms whose response is not known.
func pending(intent, digest string, sent int) history.Call {
	return history.Call{ID: intent + "/pending", IntentID: intent, RequestDigest: digest, Sent: at(sent)}
}

// failed is a call that returned an error: its effect is not known.
func failed(intent, digest string, sent, returned int) history.Call {
	return history.Call{ID: intent + "/failed", IntentID: intent, RequestDigest: digest, Sent: at(sent),
		Returned: at(returned), Err: "nats: timeout", ErrClass: "transient"}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		calls   []history.Call
		ok      bool
		naming  []string // intents the violation must name
		without int
	}{
		{name: "a created then a replayed with the same task is linearizable", ok: true,
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-a", d1, 20, 30, "replayed", "task-1"),
			}},
		{name: "a created then a conflict naming the first task is linearizable", ok: true,
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-a", d2, 20, 30, "idempotency_conflict", "task-1"),
				answered("intent-a", d1, 40, 50, "replayed", "task-1"),
			}},
		{name: "two overlapping calls may take effect in either order", ok: true,
			calls: []history.Call{
				answered("intent-a", d1, 0, 30, "replayed", "task-1"),
				answered("intent-a", d1, 10, 20, "created", "task-1"),
			}},
		{name: "two intents with a task each are linearizable", ok: true,
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-b", d1, 0, 10, "created", "task-2"),
			}},
		{name: "two created for one intent are not linearizable", naming: []string{"intent-a"},
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-a", d1, 20, 30, "created", "task-2"),
				answered("intent-b", d1, 0, 10, "created", "task-3"),
			}},
		{name: "a replay with another task id is not linearizable", naming: []string{"intent-a"},
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-a", d1, 20, 30, "replayed", "task-9"),
			}},
		{name: "a replay that came back before the created was sent is not linearizable", naming: []string{"intent-a"},
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "replayed", "task-1"),
				answered("intent-a", d1, 20, 30, "created", "task-1"),
			}},
		{name: "a conflict that changed the state is not linearizable", naming: []string{"intent-a"},
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-a", d2, 20, 30, "idempotency_conflict", "task-1"),
				answered("intent-a", d2, 40, 50, "replayed", "task-1"),
			}},
		{name: "a conflict for the digest the intent holds is not linearizable", naming: []string{"intent-a"},
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-a", d1, 20, 30, "idempotency_conflict", "task-1"),
			}},
		{name: "an outcome outside the contract is not linearizable", naming: []string{"intent-a"},
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "duplicated", "task-1"),
			}},
		{name: "a pending call that took effect explains a later replay", ok: true, without: 1,
			calls: []history.Call{
				pending("intent-a", d1, 0),
				answered("intent-a", d1, 20, 30, "replayed", "task-1"),
				answered("intent-a", d1, 40, 50, "replayed", "task-1"),
			}},
		{name: "a pending call that did not take effect explains a later created", ok: true, without: 1,
			calls: []history.Call{
				pending("intent-a", d1, 0),
				answered("intent-a", d1, 20, 30, "created", "task-1"),
			}},
		{name: "a pending call with another digest that took effect explains a later conflict", ok: true, without: 1,
			calls: []history.Call{
				pending("intent-a", d2, 0),
				answered("intent-a", d1, 20, 30, "idempotency_conflict", "task-1"),
				answered("intent-a", d2, 40, 50, "replayed", "task-1"),
			}},
		{name: "a failed call may have taken effect too", ok: true, without: 1,
			calls: []history.Call{
				failed("intent-a", d1, 0, 10),
				answered("intent-a", d1, 20, 30, "replayed", "task-1"),
			}},
		{name: "a pending call does not explain two different task ids named later", naming: []string{"intent-a"}, without: 1,
			calls: []history.Call{
				pending("intent-a", d1, 0),
				answered("intent-a", d1, 20, 30, "replayed", "task-1"),
				answered("intent-a", d1, 40, 50, "replayed", "task-2"),
			}},
		{name: "a pending call does not explain a replay that came back before it was sent", naming: []string{"intent-a"}, without: 1,
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "replayed", "task-1"),
				pending("intent-a", d1, 20),
			}},
		{name: "one task id answered for two intents is a violation naming both", naming: []string{"intent-a", "intent-b"},
			calls: []history.Call{
				answered("intent-a", d1, 0, 10, "created", "task-1"),
				answered("intent-b", d2, 20, 30, "created", "task-1"),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			html := filepath.Join(t.TempDir(), "history.html")
			res, err := linearize.Check(tt.calls, linearize.Options{Visualization: html})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tt.ok {
				t.Fatalf("OK = %v, want %v: %s", res.OK, tt.ok, res)
			}
			if res.Operations != len(tt.calls) || res.WithoutResponse != tt.without {
				t.Errorf("counted %d operations, %d without response; want %d, %d", res.Operations, res.WithoutResponse, len(tt.calls), tt.without)
			}
			if tt.ok {
				if !strings.HasPrefix(res.String(), "linearizable: ") || len(res.Violations) != 0 || res.Visualization != "" {
					t.Errorf("verdict %q, violations %v, visualisation %q", res, res.Violations, res.Visualization)
				}
				return
			}
			for _, id := range tt.naming {
				if !strings.Contains(res.String(), `"`+id+`"`) {
					t.Errorf("the verdict does not name %s: %s", id, res)
				}
			}
			if res.Visualization != html {
				t.Fatalf("visualisation %q, want %q", res.Visualization, html)
			}
			b, err := os.ReadFile(html)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "<html") || !strings.Contains(string(b), tt.naming[0]) {
				t.Errorf("the visualisation is not an HTML page naming %s", tt.naming[0])
			}
		})
	}
}

func TestCheckCountsIntentsAndSaysSoInOneLine(t *testing.T) {
	calls := []history.Call{
		answered("intent-a", d1, 0, 10, "created", "task-1"),
		pending("intent-a", d1, 5),
		answered("intent-b", d1, 0, 10, "created", "task-2"),
	}
	res, err := linearize.Check(calls, linearize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "linearizable: 3 operations, 1 without response, 2 intents, checked in "
	if !strings.HasPrefix(res.String(), want) || res.Intents != 2 || res.Took <= 0 {
		t.Fatalf("verdict %q (intents %d, took %s), want it to start %q", res, res.Intents, res.Took, want)
	}
}

func TestCheckRefusesACallWithoutAnIntentID(t *testing.T) {
	_, err := linearize.Check([]history.Call{{ID: "x", Sent: at(0)}}, linearize.Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "linearize: ") {
		t.Fatalf("err = %v, want a linearize error", err)
	}
}

// TestCheckStaysFastOnTensOfThousandsOfCalls checks 30,000 calls on
// 10,000 intents, a third of them without response, concurrent in pairs.
func TestCheckStaysFastOnTensOfThousandsOfCalls(t *testing.T) {
	var calls []history.Call
	for i := range 10_000 {
		intent := fmt.Sprintf("intent-%06d", i)
		task := fmt.Sprintf("task-%06d", i)
		base := i * 3
		calls = append(calls,
			pending(intent, d1, base),
			answered(intent, d1, base+1, base+40, "created", task),
			answered(intent, d1, base+2, base+30, "replayed", task))
	}
	res, err := linearize.Check(calls, linearize.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Operations != 30_000 || res.WithoutResponse != 10_000 || res.Intents != 10_000 {
		t.Fatalf("%s", res)
	}
	t.Log(res)
}

// TestAViolationAmongManyCallsWithoutResponseIsFoundQuickly: a search
// that tried every subset of 24 calls without response would not end in
// time.
func TestAViolationAmongManyCallsWithoutResponseIsFoundQuickly(t *testing.T) {
	var calls []history.Call
	for i := range 24 {
		c := pending("intent-a", []string{d1, d2}[i%2], i)
		c.ID = fmt.Sprintf("pending-%d", i)
		calls = append(calls, c)
	}
	calls = append(calls,
		answered("intent-a", d1, 100, 110, "replayed", "task-1"),
		answered("intent-a", d1, 120, 130, "created", "task-2"))
	res, err := linearize.Check(calls, linearize.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.TimedOut || res.Operations != 26 || res.WithoutResponse != 24 ||
		!strings.Contains(res.String(), `intent "intent-a": no order of its 26 calls`) {
		t.Fatalf("%s (timed out %v)", res, res.TimedOut)
	}
}

// deleted is the owner's delete of intent's task, from ms sent to ms
// returned, that succeeded.
func deleted(intent string, sent, returned int) history.Call {
	return history.Call{ID: fmt.Sprintf("%s/delete/%d", intent, sent), Op: history.OpDelete, IntentID: intent,
		Sent: at(sent), Returned: at(returned), Answered: true, Outcome: history.Deleted}
}

// replayedDeleted is a replay marked: the task was deleted.
func replayedDeleted(intent, digest string, sent, returned int, task string) history.Call {
	c := answered(intent, digest, sent, returned, "replayed", task)
	c.ID += fmt.Sprintf("/deleted/%d", sent)
	c.TaskDeleted = true
	return c
}

func TestCheckWithDeletes(t *testing.T) {
	tests := []struct {
		name  string
		calls []history.Call
		ok    bool
	}{
		{"a replay after the delete answers the first task, marked deleted: linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			deleted("intent-a", 20, 30),
			replayedDeleted("intent-a", d1, 40, 50, "task-1"),
		}, true},
		{"a conflict after the delete names the first task: linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			deleted("intent-a", 20, 30),
			answered("intent-a", d2, 40, 50, "idempotency_conflict", "task-1"),
		}, true},
		{"a replay overlapping the delete may come either side of it: linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			deleted("intent-a", 20, 40),
			answered("intent-a", d1, 25, 35, "replayed", "task-1"),
			replayedDeleted("intent-a", d1, 30, 45, "task-1"),
		}, true},
		{"a delete whose response is lost may have happened: a later marked replay is linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			{ID: "intent-a/delete/lost", Op: history.OpDelete, IntentID: "intent-a", Sent: at(20)},
			replayedDeleted("intent-a", d1, 40, 50, "task-1"),
		}, true},
		{"a re-creation after the delete is not linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			deleted("intent-a", 20, 30),
			answered("intent-a", d1, 40, 50, "created", "task-2"),
		}, false},
		{"a re-creation with the same task id after the delete is not linearizable either", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			deleted("intent-a", 20, 30),
			answered("intent-a", d1, 40, 50, "created", "task-1"),
		}, false},
		{"a replay after the delete without the mark is not linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			deleted("intent-a", 20, 30),
			answered("intent-a", d1, 40, 50, "replayed", "task-1"),
		}, false},
		{"a replay marked deleted before any delete is not linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			replayedDeleted("intent-a", d1, 20, 30, "task-1"),
			deleted("intent-a", 40, 50),
		}, false},
		{"a delete of a task that was never created is not linearizable", []history.Call{
			deleted("intent-a", 0, 10),
		}, false},
		{"a second successful delete of one task is not linearizable", []history.Call{
			answered("intent-a", d1, 0, 10, "created", "task-1"),
			deleted("intent-a", 20, 30),
			deleted("intent-a", 40, 50),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := linearize.Check(tt.calls, linearize.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tt.ok {
				t.Errorf("OK = %v, want %v: %s", res.OK, tt.ok, res)
			}
			if !tt.ok && (len(res.Violations) != 1 || res.Violations[0].Intents[0] != "intent-a") {
				t.Errorf("violations %v; want one naming intent-a", res.Violations)
			}
		})
	}
}
