package boundary

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// stated are rules some packages must keep stating, by short path: a
// package may state more, or a narrower "anything but", never drop one. A
// package the module does not hold (yet) is passed over.
var stated = []struct {
	pkg   string
	but   bool
	words []string
}{
	{"internal/canon", true, []string{"the standard library"}},
	{"internal/queue", true, []string{"the standard library"}},
	{"taskservice", true, []string{"the standard library"}},
	{"taskservice/redmine", true, []string{"the standard library", "taskservice", "taskservice/internal/endpoint", "taskservice/internal/proof", "internal/redact"}},
	{"internal/subjects", false, []string{"NATS"}},
	{"internal/gate", false, []string{"NATS"}},
	{"internal/document", false, []string{"NATS"}},
	{"internal/provider", false, []string{"internal/document", "internal/gate", "internal/sign"}},
	{"cmd/internal/metrics", false, []string{"internal/gate"}},
	{"internal/executor", false, []string{"internal/provider"}},
	{"send", false, []string{"Pebble", "nats-server", "the OpenTelemetry SDK", "a test rig"}},
	{"approval", false, []string{"Pebble", "nats-server", "a test rig"}},
	{"sendtest", false, []string{"pgx", "a test rig"}},
	{"internal/testenv", false, nil},
	{"cmd/internal/deploytest", false, nil},
	{"internal/davtest", false, nil},
	{"internal/redminetest", false, nil},
	{"internal/jaegertest", false, nil},
}

// readRules parses the doc.go of every package of the module but the
// commands, and reports each that states no rule it can read; a public
// package's rules are read from publicRules instead.
func readRules(t *testing.T, g graph) []rule {
	t.Helper()
	errorf := t.Errorf
	if !strings.Contains(t.Name(), "SaysWhat") {
		errorf = t.Logf // reported once, by TestEveryPackageSaysWhatItMustNeverImport
	}
	known := func(p string) bool { return g[p] != nil && ours(p) }
	var rules []rule
	for path, p := range g {
		if p.Standard || !ours(path) || p.Name == "main" {
			continue
		}
		doc, err := packageDoc(p.Dir)
		if errors.Is(err, os.ErrNotExist) {
			errorf("%s has no doc.go", short(path))
			continue
		} else if err != nil {
			errorf("%s: %v", short(path), err)
			continue
		}
		read := parse
		if isPublic(path) {
			read = publicRule
		}
		rs, err := read(path, doc, known)
		if err != nil {
			errorf("%s/doc.go: %v", short(path), err)
			continue
		}
		rules = append(rules, rs...)
	}
	return rules
}

func TestEveryPackageSaysWhatItMustNeverImport(t *testing.T) {
	g := load(t)
	rules := readRules(t, g)
	for _, s := range stated {
		path := module + "/" + s.pkg
		if g[path] == nil {
			t.Logf("%s is not in the module: its rule is not checked", s.pkg)
			continue
		}
		want := make([]string, len(s.words))
		for i, w := range s.words {
			if vocabulary[w] == nil {
				w = module + "/" + w
			}
			want[i] = w
		}
		if !slices.ContainsFunc(rules, func(r rule) bool {
			switch {
			case r.doc != path:
				return false
			case s.words == nil:
				return r.importedBy
			case r.but != s.but || r.importedBy:
				return false
			case s.but:
				return !slices.ContainsFunc(r.words, func(w string) bool { return !slices.Contains(want, w) })
			}
			return !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(r.words, w) })
		}) {
			form := "never import " + strings.Join(s.words, ", ")
			switch {
			case s.words == nil:
				form = "never be imported by a production package"
			case s.but:
				form = "never import anything but " + strings.Join(s.words, ", ")
			}
			where := s.pkg + "/doc.go"
			if isPublic(path) {
				where = "publicRules, for " + s.pkg + ","
			}
			t.Errorf("%s no longer says it must %s", where, form)
		}
	}
}

func TestNoPackageCrossesALineItsDocDraws(t *testing.T) {
	g := load(t)
	for _, v := range violations(g, readRules(t, g)) {
		t.Error(v)
	}
}
