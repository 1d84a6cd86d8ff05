package boundary

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// publicRules are the import rules of the module's public packages, the
// ones an application imports. Their doc.go is for the people who use
// them and says nothing of how they are kept, so their rules are stated
// here, where maintainers look, each with the promises the package keeps
// beyond its imports.
var publicRules = map[string]string{
	// approval never writes a private key where others may read it, never
	// shows a private key in a string, an error or a log, and never
	// returns an approval the executors' binding checks would refuse.
	"approval": "It must never import Pebble, nats-server or a test rig.",
	// send never exposes the module's internal types (send/api_test.go),
	// never publishes what a local check refused, never reuses a message
	// id for another send, never reports a receipt that is not for its
	// own message or that the stream did not store, and never creates a
	// consumer to wait. The commands, the approval console, the demo and
	// sendtest send through it; two paths publish without it on purpose:
	// the bench stores its backlogs as atomic batches of its own, and
	// tests of the executors publish raw messages to see what the
	// executors make of them.
	// send takes part in a trace through OpenTelemetry's API only.
	"send": "It must never import Pebble, nats-server, the OpenTelemetry SDK or a test rig.",
	// sendtest never listens off loopback, never leaves a process, a
	// server or a file behind once the test (or Close) is done, never
	// exposes a type of the module's internal packages, and never accepts
	// an approval its reviewer did not sign; the module's commands leave
	// it to tests.
	"sendtest": "It must never import pgx or a test rig.",
	// taskservice is the line an adapter is written against.
	"taskservice": "It must never import anything but the standard library: nothing of NATS, of Pebble or of the rest of this module.",
	// caldav's nevers toward its users (no overwrite, the password only
	// to the collection's server, no secret echoed, no guess) are in its
	// doc.go, as what it never does.
	"taskservice/caldav": "It must never import anything but the standard library, taskservice, go-webdav, go-ical, " +
		"taskservice/internal/endpoint, taskservice/internal/proof, internal/canon, internal/document and internal/redact.",
	// redmine's two small packages reach only the standard library, so
	// it holds nothing of NATS or Pebble, nothing of the pipeline, and an
	// application uses it alone.
	"taskservice/redmine": "It must never import anything but the standard library, taskservice, " +
		"taskservice/internal/endpoint, taskservice/internal/proof and internal/redact.",
	"taskservice/servicetest": "It must never import anything but the standard library and taskservice.",
}

// isPublic reports whether path is a public package of the module: one
// outside internal/ and outside the modules of the commands, the bench
// and the tests.
func isPublic(path string) bool {
	s, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return false
	}
	for _, prefix := range []string{"internal/", "cmd/", "bench/", "tests/"} {
		if strings.HasPrefix(s, prefix) {
			return false
		}
	}
	return !strings.Contains(s, "/internal/")
}

// publicRule reads the rules of public package path from publicRules. Its
// doc.go, doc, must state none: a rule there is a maintainer's, shown to
// every user of the package.
func publicRule(path, doc string, known func(string) bool) ([]rule, error) {
	text := strings.Join(strings.Fields(prose(doc)), " ")
	at := -1
	for _, re := range []*regexp.Regexp{importRule, looksLikeRule} {
		if l := re.FindStringIndex(text); l != nil && (at < 0 || l[0] < at) {
			at = l[0]
		}
	}
	if at >= 0 {
		return nil, fmt.Errorf("%q: a public package's doc is for its users; state its import rule in publicRules (internal/boundary/public_test.go)", sentenceAt(text, at))
	}
	sentence, ok := publicRules[short(path)]
	if !ok {
		return nil, errors.New("a public package with no entry in publicRules (internal/boundary/public_test.go): state there what it must never import")
	}
	rules, err := parse(path, sentence, known)
	for i := range rules {
		rules[i].source = "internal/boundary/public_test.go"
	}
	return rules, err
}

func TestAPublicPackagesDocLeavesItsRulesToThisTest(t *testing.T) {
	known := func(p string) bool { return ours(p) }
	for _, tc := range []struct {
		name, path, doc, want string
	}{
		{"a rule in a public package's doc.go is refused", module + "/send",
			"Package send sends. It must never import Pebble.", `"It must never import Pebble.": a public package's doc is for its users`},
		{"a rule in another form in a public package's doc.go is refused", module + "/approval",
			"Package approval approves. It imports nothing of NATS.", "a public package's doc is for its users"},
		{"a public package missing from publicRules is refused", module + "/newpublic",
			"Package newpublic does a new thing.", "no entry in publicRules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := publicRule(tc.path, tc.doc, known)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("publicRule(%q) = %v, want an error containing %q", tc.doc, err, tc.want)
			}
		})
	}
	t.Run("a public package's rule is read from publicRules and names it as its source", func(t *testing.T) {
		rules, err := publicRule(module+"/send", "Package send sends approved requests.", known)
		if err != nil || len(rules) != 1 || rules[0].source != "internal/boundary/public_test.go" || rules[0].sentence != "never import Pebble, nats-server, the OpenTelemetry SDK or a test rig" {
			t.Fatalf("publicRule: %+v, %v", rules, err)
		}
	})
	for path, want := range map[string]bool{
		module + "/send": true, module + "/taskservice/caldav": true,
		module + "/internal/gate": false, module + "/taskservice/internal/endpoint": false,
		module + "/cmd/internal/demo": false, module + "/tests/console": false, "github.com/x/y": false,
	} {
		if isPublic(path) != want {
			t.Errorf("isPublic(%q) = %v, want %v", path, !want, want)
		}
	}
}
