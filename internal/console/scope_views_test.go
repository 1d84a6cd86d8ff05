package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/send"
)

func TestAReceiptShowsItsScopeAndADeletedTask(t *testing.T) {
	pages, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	render := func(t *testing.T, name string, v resultView) string {
		t.Helper()
		var b bytes.Buffer
		if err := pages["review"].ExecuteTemplate(&b, name, v); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		receipt   send.Receipt
		want, not []string
	}{
		{"a replay of a deleted task says the task was deleted and nothing was created again",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "team-a", TaskDeleted: true},
			[]string{`data-task-deleted="true"`, "(the task was deleted since)", "it was not created again", `Scope <code class="scope">team-a</code>`, "replayed (task deleted)"}, nil},
		{"a replay of a task that exists says nothing of a deletion",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "default"},
			[]string{`Scope <code class="scope">default</code>`}, []string{"deleted"}},
		{"a receipt without a scope names none",
			send.Receipt{Outcome: send.Created, TaskID: "fake-task-0001", IntentID: "intent-0001"},
			[]string{"Stream message"}, []string{`class="scope"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := c.receipt
			v := resultView{N: 1, At: at, Receipt: &rc}
			out := render(t, "result", v) + render(t, "sendrow", v)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the result lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("the result holds %q:\n%s", w, out)
				}
			}
		})
	}
}
