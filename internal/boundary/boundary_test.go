package boundary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sendtwice/sendtwice"

// pkg is one package of the import graph.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	Imports    []string
}

// graph is an import graph by import path: the module's packages and
// everything they import.
type graph map[string]*pkg

// standard reports whether path is a standard library package. A path the
// graph does not hold (the cgo pseudo-package "C") counts as standard when
// its first element has no dot.
func (g graph) standard(path string) bool {
	if p, ok := g[path]; ok {
		return p.Standard
	}
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// ours reports whether path is a package of the module.
func ours(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }

// short is path without the module's prefix.
func short(path string) string {
	s, _ := strings.CutPrefix(path, module+"/")
	return s
}

// reach returns the packages from reaches, each with the chain of imports
// that leads to it, in breadth-first order. A package for which stop
// reports true is reached but not looked into.
func (g graph) reach(from string, stop func(string) bool) (order []string, via map[string][]string) {
	via = map[string][]string{from: nil}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p, ok := g[cur]
		if !ok || (cur != from && stop(cur)) {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = append(slices.Clone(via[cur]), cur)
			order = append(order, imp)
			queue = append(queue, imp)
		}
	}
	return order, via
}

// A rule is one sentence of a doc.go about imports, read by parse:
//
//	It must never import NATS, Pebble or a test rig.
//	It must never import anything but the standard library and taskservice.
//	It must never be imported by a production package.
//
// The words a rule lists are those of vocabulary, or the path of a package
// of the module without the module's prefix (internal/gate, taskservice).
type rule struct {
	// doc is the package the rule binds; sentence is the rule as
	// written, in source: its doc.go, or publicRules for a public
	// package.
	doc, sentence, source string
	// importedBy is set for "never be imported by": the rule binds the
	// packages its words name, not doc.
	importedBy bool
	// but is set for "anything but": the words name all that doc may
	// import besides what the packages it names import in turn.
	but   bool
	words []string
}

// vocabulary maps the words a rule may use, but the module's own packages,
// to what they match in the import graph. rigs holds the test rigs: the
// packages whose doc.go says they must never be imported by a production
// package.
var vocabulary = map[string]func(g graph, rigs []string, doc, dep string) bool{
	"NATS":            prefix("github.com/nats-io"),
	"nats-server":     prefix("github.com/nats-io/nats-server"),
	"the NATS client": prefix("github.com/nats-io/nats.go"),
	"Pebble":          prefix("github.com/cockroachdb/pebble"),
	"pgx":             prefix("github.com/jackc"),
	"Prometheus":      prefix("github.com/prometheus"),
	"go-webdav":       prefix("github.com/emersion/go-webdav"),
	"go-ical":         prefix("github.com/emersion/go-ical"),
	"porcupine":       prefix("github.com/anishathalye/porcupine"),
	"the OpenTelemetry SDK": func(g graph, rigs []string, doc, dep string) bool {
		return prefix("go.opentelemetry.io/otel/sdk")(g, rigs, doc, dep) || prefix("go.opentelemetry.io/otel/exporters")(g, rigs, doc, dep)
	},
	"the standard library":    func(g graph, _ []string, _, dep string) bool { return g.standard(dep) },
	"the rest of this module": func(_ graph, _ []string, doc, dep string) bool { return ours(dep) && dep != doc },
	"a test rig":              func(_ graph, rigs []string, _, dep string) bool { return slices.Contains(rigs, dep) },
	"a production package":    func(_ graph, rigs []string, _, dep string) bool { return ours(dep) && !slices.Contains(rigs, dep) },
	"otelhttp":                prefix("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"),
}

func prefix(p string) func(graph, []string, string, string) bool {
	return func(_ graph, _ []string, _, dep string) bool { return dep == p || strings.HasPrefix(dep, p+"/") }
}

var (
	importRule = regexp.MustCompile(`(?i)\bnever (import|be imported by) ([^.:;()]+)`)
	// looksLikeRule finds a sentence about imports in another form than
	// importRule's ("never imports", "must not import", "imports nothing
	// of"): the test cannot read it, so it must not pass it over.
	looksLikeRule = regexp.MustCompile(`(?i)(?:\b(?:never|not|cannot|nor)|n['’]t)(?:\s+[\w/-]+){0,2}?\s+(?:be\s+)?import(?:s|ed|ing)?\b|\bimport(?:s|ed)?\s+(?:by\s+)?(?:no|nothing|none)\b`)
	listSplitter  = regexp.MustCompile(`,? (?:or|nor|and) |, `)
	modulePath    = regexp.MustCompile(`^[a-z][a-z0-9]*(/[a-z][a-z0-9]*)*$`)
)

// parse reads the import rules of the package comment doc of package path.
// known reports whether a path names a package of the module. A doc that
// states no rule, or a rule with a word parse does not know, is an error.
// The code blocks of doc (its indented lines, as go doc shows them) are
// examples, not rules: parse skips them.
func parse(path, doc string, known func(string) bool) ([]rule, error) {
	doc = strings.Join(strings.Fields(prose(doc)), " ")
	// "never be imported by X, and never import Y" holds two rules: each
	// search starts after the list of the rule before.
	var found [][]int
	for at := 0; ; {
		f := importRule.FindStringSubmatchIndex(doc[at:])
		if f == nil {
			break
		}
		for i := range f {
			f[i] += at
		}
		found = append(found, f)
		at = f[1]
		if i := strings.Index(doc[f[4]:f[5]], " never "); i >= 0 {
			at = f[4] + i + 1
		}
	}
	for _, l := range looksLikeRule.FindAllStringIndex(doc, -1) {
		if !slices.ContainsFunc(found, func(f []int) bool { return f[0] >= l[0] && f[0] < l[1] }) {
			return nil, fmt.Errorf("%q: a sentence about imports the boundary test cannot read; write it as \"It must never import NATS or Pebble.\" or \"It must never be imported by a production package.\"", sentenceAt(doc, l[0]))
		}
	}
	var rules []rule
	for _, f := range found {
		m := []string{doc[f[0]:f[1]], doc[f[2]:f[3]], doc[f[4]:f[5]]}
		r := rule{doc: path, source: short(path) + "/doc.go", importedBy: m[1] != "import"}
		// "never import X, and never block": the list ends at the next never.
		list, _, cut := strings.Cut(m[2], " never ")
		if !cut && strings.HasPrefix(doc[f[1]:], "(") {
			// "never import A (a note), B or C" would enforce A alone.
			return nil, fmt.Errorf("%q: the list of a rule cannot hold parentheses; end the list with a colon and put the note after it", sentenceAt(doc, f[0]))
		}
		list = strings.TrimSuffix(strings.TrimSpace(list), " and")
		list = strings.TrimSuffix(list, ",")
		r.sentence = strings.TrimSpace(strings.TrimSuffix(m[0], m[2]) + list)
		if rest, ok := strings.CutPrefix(list, "anything but "); ok {
			r.but, list = true, rest
		}
		for _, w := range listSplitter.Split(list, -1) {
			for _, filler := range []string{"anything of ", "of ", "package ", "packages "} {
				w = strings.TrimPrefix(w, filler)
			}
			switch {
			case vocabulary[w] != nil:
			case modulePath.MatchString(w) && known(module+"/"+w):
				w = module + "/" + w
			default:
				return nil, fmt.Errorf("%q: %q is not a word the boundary test knows (%s) nor a package of the module", m[0], w, strings.Join(words(), ", "))
			}
			r.words = append(r.words, w)
		}
		if r.importedBy && (r.but || !slices.Equal(r.words, []string{"a production package"})) {
			return nil, fmt.Errorf("%q: only \"never be imported by a production package\" is known", m[0])
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		return nil, errors.New(`doc.go states no rule the boundary test reads ("It must never import NATS or Pebble.", "It must never import anything but the standard library.")`)
	}
	return rules, nil
}

// prose returns the text of a package comment without its code blocks.
func prose(doc string) string {
	var b strings.Builder
	var text func([]comment.Text)
	text = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				b.WriteString(string(t))
			case comment.Italic:
				b.WriteString(string(t))
			case *comment.Link:
				text(t.Text)
			case *comment.DocLink:
				text(t.Text)
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, bl := range bs {
			switch bl := bl.(type) {
			case *comment.Paragraph:
				text(bl.Text)
			case *comment.Heading:
				text(bl.Text)
			case *comment.List:
				for _, it := range bl.Items {
					blocks(it.Content)
				}
			}
			b.WriteString("\n")
		}
	}
	var p comment.Parser
	blocks(p.Parse(doc).Content)
	return b.String()
}

// sentenceAt returns the sentence of doc that holds index i.
func sentenceAt(doc string, i int) string {
	start := strings.LastIndex(doc[:i], ". ") + 1
	end := strings.Index(doc[i:], ". ")
	if end < 0 {
		return strings.TrimSpace(doc[start:])
	}
	return strings.TrimSpace(doc[start : i+end+1])
}

func words() []string {
	var ws []string
	for w := range vocabulary {
		ws = append(ws, fmt.Sprintf("%q", w))
	}
	slices.Sort(ws)
	return ws
}

// names reports whether one of r's words names dep.
func (r rule) names(g graph, rigs []string, dep string) bool {
	for _, w := range r.words {
		if m := vocabulary[w]; m != nil && m(g, rigs, r.doc, dep) || dep == w {
			return true
		}
	}
	return false
}

// violations returns every package of g that reaches a package a rule
// refuses, with the chain of imports that leads there.
func violations(g graph, rules []rule) []string {
	var rigs []string
	for _, r := range rules {
		if r.importedBy {
			rigs = append(rigs, r.doc)
		}
	}
	paths := make([]string, 0, len(g))
	for p := range g {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var out []string
	for _, r := range rules {
		from, refuses, stop := []string{r.doc}, func(dep string) bool { return r.names(g, rigs, dep) }, g.standard
		switch {
		case r.importedBy:
			from = nil
			for _, p := range paths {
				if p != r.doc && r.names(g, rigs, p) {
					from = append(from, p)
				}
			}
			refuses = func(dep string) bool { return dep == r.doc }
		case r.but:
			// What an allowed package imports is for its own rule to say.
			refuses = func(dep string) bool { return !g.standard(dep) && !r.names(g, rigs, dep) }
			stop = func(dep string) bool { return g.standard(dep) || r.names(g, rigs, dep) }
		}
		for _, p := range from {
			order, via := g.reach(p, stop)
			for _, dep := range order {
				if refuses(dep) {
					chain := append(via[dep][1:], dep)
					out = append(out, fmt.Sprintf("%s imports %s, but %s says: %q", short(p), strings.Join(chain, " → "), r.source, r.sentence))
					break
				}
			}
		}
	}
	return out
}

// fake builds a graph from edges "a -> b"; a path with a dot in its first
// element is not standard, and the module's paths are written short
// (internal/gate).
func fake(edges ...string) graph {
	g := graph{}
	add := func(path string) string {
		first, _, _ := strings.Cut(path, "/")
		if !strings.Contains(first, ".") && (strings.Contains(path, "/") && first != "net" && first != "encoding" || path == "taskservice" || path == "send") {
			path = module + "/" + path
		}
		if g[path] == nil {
			first, _, _ := strings.Cut(path, "/")
			g[path] = &pkg{ImportPath: path, Standard: !strings.Contains(first, ".")}
		}
		return path
	}
	for _, e := range edges {
		from, to, _ := strings.Cut(e, " -> ")
		f, t := add(from), add(to)
		g[f].Imports = append(g[f].Imports, t)
	}
	return g
}

// docs are package comments for the fake graphs, by short path.
var docs = map[string]string{
	"internal/canon":       "Package canon ... It must never import anything but the standard library: every digest rests on it.",
	"internal/gate":        "Package gate ... and never import anything of NATS: the delivery's bytes are given.",
	"internal/provider":    "It must never import package internal/document, internal/gate or internal/sign.",
	"taskservice":          "This package must never import anything but the standard library: it is the line.",
	"taskservice/redmine":  "It must never import anything but the standard library and taskservice.",
	"send":                 "It must never import Pebble, nats-server or a test rig.",
	"internal/testenv":     "It must never be imported by a production package.",
	"internal/deploytest":  "It must never be imported by a production package.",
	"internal/executor":    "It must never import internal/provider.",
	"internal/metrics":     "It must never import the standard library nor internal/gate.",
	"cmd/executor":         "", // a command states nothing
	"internal/topology":    "It must never import pgx.",
	"internal/storedmsg":   "It must never import Pebble, nats-server or internal/executor.",
	"github.com/x/y":       "",
	"github.com/nats-io/x": "",
}

func TestTheBoundaryCheckRefusesAForbiddenEdge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges []string
		want  string
	}{
		{"a graph that keeps every rule passes",
			[]string{"internal/gate -> internal/canon", "internal/canon -> fmt", "internal/executor -> taskservice", "taskservice -> context",
				"cmd/executor -> internal/provider", "internal/provider -> github.com/cockroachdb/pebble/v2",
				"taskservice/redmine -> taskservice", "taskservice/redmine -> net/http", "send -> github.com/nats-io/nats.go",
				"internal/testenv -> internal/deploytest"}, ""},
		{"gate importing nats.go is refused",
			[]string{"internal/gate -> github.com/nats-io/nats.go"},
			`internal/gate imports github.com/nats-io/nats.go, but internal/gate/doc.go says: "never import anything of NATS"`},
		{"gate reaching NATS through another package is refused and the chain named",
			[]string{"internal/gate -> internal/topology", "internal/topology -> github.com/nats-io/nats.go/jetstream"},
			"internal/gate imports " + module + "/internal/topology → github.com/nats-io/nats.go/jetstream"},
		{"canon importing a module of its own is refused",
			[]string{"internal/canon -> golang.org/x/text/unicode/norm"}, "internal/canon imports golang.org/x/text/unicode/norm"},
		{"taskservice importing a package of the module is refused",
			[]string{"taskservice -> internal/canon"}, "taskservice imports " + module + "/internal/canon"},
		{"redmine importing a package of the module but taskservice is refused",
			[]string{"taskservice/redmine -> taskservice", "taskservice/redmine -> internal/redact"}, "taskservice/redmine imports " + module + "/internal/redact"},
		{"what an allowed package imports is its own rule's business",
			[]string{"taskservice/redmine -> taskservice", "taskservice -> github.com/x/y"}, "taskservice imports github.com/x/y"},
		{"provider reaching sign through canon is refused",
			[]string{"internal/provider -> internal/canon", "internal/canon -> internal/sign"}, "internal/provider imports " + module + "/internal/canon → " + module + "/internal/sign"},
		{"executor importing provider is refused",
			[]string{"internal/executor -> internal/provider"}, "internal/executor imports " + module + "/internal/provider"},
		{"send importing nats-server is refused",
			[]string{"send -> internal/storedmsg", "internal/storedmsg -> github.com/nats-io/nats-server/v2/server"}, "send imports " + module + "/internal/storedmsg → github.com/nats-io/nats-server/v2/server"},
		{"a standard package a rule names is refused",
			[]string{"internal/metrics -> fmt"}, "internal/metrics imports fmt"},
		{"a command importing testenv is refused",
			[]string{"cmd/executor -> internal/testenv"}, `cmd/executor imports ` + module + `/internal/testenv, but internal/testenv/doc.go says: "never be imported by a production package"`},
		{"a package reaching a rig through another is refused",
			[]string{"send -> internal/storedmsg", "internal/storedmsg -> internal/deploytest"}, "send imports " + module + "/internal/storedmsg → " + module + "/internal/deploytest"},
		{"a public package importing a rig is refused by its own rule too",
			[]string{"send -> internal/testenv"}, `but send/doc.go says: "never import Pebble, nats-server or a test rig"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := fake(tc.edges...)
			var rules []rule
			for path := range g {
				doc := docs[short(path)]
				if doc == "" {
					continue
				}
				rs, err := parse(path, doc, func(p string) bool { return ours(p) })
				if err != nil {
					t.Fatal(err)
				}
				rules = append(rules, rs...)
			}
			got := strings.Join(violations(g, rules), "\n")
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("refused:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Fatalf("got %q, want a refusal containing %q", got, tc.want)
			}
		})
	}
}

func TestTheParserRefusesADocItCannotRead(t *testing.T) {
	known := func(p string) bool { return p == module+"/internal/gate" || p == module+"/taskservice" }
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"no rule at all", "Package x does things. It must never do anything wrong.", "states no rule"},
		{"the word never alone", "It never imports what it should not.", `"It never imports what it should not.": a sentence about imports the boundary test cannot read`},
		{"never imports beside a readable rule", "It must never import NATS. It never imports Pebble either.", `"It never imports Pebble either.": a sentence about imports`},
		{"must not import beside a readable rule", "It must never import NATS. It must not import Pebble.", `"It must not import Pebble.": a sentence about imports`},
		{"may not import beside a readable rule", "It must never import NATS. A command may not import it.", `"A command may not import it.": a sentence about imports`},
		{"cannot import", "It must never import NATS, and it cannot import Pebble.", `"It must never import NATS, and it cannot import Pebble.": a sentence about imports`},
		{"never directly import", "It must never import NATS and never directly import Pebble.", `a sentence about imports`},
		{"imported by without be", "It must never import NATS. It is never imported by a command.", `"It is never imported by a command.": a sentence about imports`},
		{"imports nothing of", "It must never import Pebble. It imports nothing of NATS.", `"It imports nothing of NATS.": a sentence about imports`},
		{"a note in parentheses inside the list", "It must never import NATS (the client), Pebble or pgx.", `"It must never import NATS (the client), Pebble or pgx.": the list of a rule cannot hold parentheses`},
		{"a note in parentheses after the list", "It must never import anything but the standard library (nothing else).", `the list of a rule cannot hold parentheses`},
		{"a rule only in a code block", "Rules read:\n\n\tIt must never import NATS.\n\nThat is all.", "states no rule"},
		{"an unknown word", "It must never import NATS or Kafka.", `"Kafka" is not a word`},
		{"a package the module does not hold", "It must never import internal/nothere.", `"internal/nothere" is not a word`},
		{"a full import path", "It must never import github.com/nats-io/nats.go.", `"github" is not a word`},
		{"words after the list", "It must never import NATS, so that it stays small.", `"so that it stays small" is not a word`},
		{"imported by anything but a production package", "It must never be imported by internal/gate.", "only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(module+"/x", tc.doc, known)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parse(%q) = %v, want an error containing %q", tc.doc, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		doc  string
		want rule
	}{
		{"It must never import anything of NATS, of Pebble or of the rest of this module: it is the line.",
			rule{sentence: "never import anything of NATS, of Pebble or of the rest of this module", words: []string{"NATS", "Pebble", "the rest of this module"}}},
		{"It must never import anything but the standard library and taskservice.",
			rule{sentence: "never import anything but the standard library and taskservice", but: true, words: []string{"the standard library", module + "/taskservice"}}},
		{"It must never\nimport package internal/gate, nor nats-server, and never block.",
			rule{sentence: "never import package internal/gate, nor nats-server", words: []string{module + "/internal/gate", "nats-server"}}},
		{"A rig: it must never be imported by a production package.",
			rule{sentence: "never be imported by a production package", importedBy: true, words: []string{"a production package"}}},
		{"A rule reads:\n\n\tIt must never import Kafka.\n\nIt must never import NATS: an example in a code block is no rule.",
			rule{sentence: "never import NATS", words: []string{"NATS"}}},
		{"It must never import NATS and never block (it is a queue).",
			rule{sentence: "never import NATS", words: []string{"NATS"}}},
	} {
		got, err := parse(module+"/x", tc.doc, known)
		tc.want.doc = module + "/x"
		if err != nil || len(got) != 1 || got[0].sentence != tc.want.sentence || got[0].but != tc.want.but ||
			got[0].importedBy != tc.want.importedBy || !slices.Equal(got[0].words, tc.want.words) {
			t.Errorf("parse(%q) = %+v, %v; want %+v", tc.doc, got, err, tc.want)
		}
	}
	// Two rules in one sentence are two rules.
	doc := "A rig: it must never be imported by a production package, and never import anything but the standard library."
	got, err := parse(module+"/x", doc, known)
	if err != nil || len(got) != 2 || !got[0].importedBy || !got[1].but || !slices.Equal(got[1].words, []string{"the standard library"}) {
		t.Errorf("parse(%q) = %+v, %v; want a rig's rule and \"anything but the standard library\"", doc, got, err)
	}
}

// load reads the module's import graph with go list.
func load(t *testing.T) graph {
	t.Helper()
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("finding the go command: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Name,Dir,Standard,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		g[p.ImportPath] = &p
	}
	if g[module+"/internal/gate"] == nil {
		t.Fatalf("go list listed %d packages, without %s", len(g), module+"/internal/gate")
	}
	readSources(t, g)
	return g
}

// readSources reads the module's package directories and Go files. The
// test learns nothing from them that go list did not say, but go test then
// knows the result depends on them and runs the test again when an import
// or a doc.go changes, instead of reporting a cached pass.
func readSources(t *testing.T, g graph) {
	t.Helper()
	for path, p := range g {
		if p.Standard || !ours(path) {
			continue
		}
		entries, err := os.ReadDir(p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") {
				if _, err := os.ReadFile(filepath.Join(p.Dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// packageDoc returns the package comment of the doc.go in dir.
func packageDoc(dir string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return "", err
	}
	if f.Doc == nil {
		return "", errors.New("doc.go has no package comment")
	}
	return f.Doc.Text(), nil
}
