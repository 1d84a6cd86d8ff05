package console_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func TestReviewShowsTheRequestsDestination(t *testing.T) {
	env := testenv.Start(t)
	dir := copyFixtures(t)
	editJSON(t, filepath.Join(dir, "release-notes.request.json"), func(m map[string]any) {
		m["provider"], m["destination"] = document.ProviderCalDAV, "team"
	})
	s := startConsole(t, env, dir, nil)
	for _, c := range []struct{ name, path, want string }{
		{"a request naming no destination shows its provider's default one", "/c/notify-checks",
			`<dd id="destination">provider <code class="provider">fake-task-provider.v1</code>, destination <code class="destination">default</code> <span class="hint">the request names no destination`},
		{"a request for a CalDAV calendar named team shows the provider and the name", "/c/release-notes",
			`<dd id="destination">provider <code class="provider">caldav-task.v1</code>, destination <code class="destination">team</code> <span class="hint">where the task is made`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.get(t, c.path).expect(t, http.StatusOK, c.want)
		})
	}
}
