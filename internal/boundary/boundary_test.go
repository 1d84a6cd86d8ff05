package boundary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// reach returns the packages from reaches, each with the chain of imports
// that leads to it, in breadth-first order.
func (g graph) reach(from string) (order []string, via map[string][]string) {
	via = map[string][]string{from: nil}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p, ok := g[cur]
		if !ok {
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

// rule is one line a doc.go draws: the packages it applies to must never
// reach a package it refuses.
type rule struct {
	// line says the rule in a few words.
	line string
	// doc is the package whose doc.go draws the line, phrase the words it
	// uses (compared without regard to case or line breaks).
	doc, phrase string
	applies     func(path string) bool
	refuses     func(g graph, dep string) bool
}

func internal(name string) string { return module + "/internal/" + name }

func only(paths ...string) func(string) bool {
	return func(p string) bool { return slices.Contains(paths, p) }
}

func anyOf(paths ...string) func(graph, string) bool {
	return func(_ graph, dep string) bool { return slices.Contains(paths, dep) }
}

func notStandard(g graph, dep string) bool { return !g.standard(dep) }

func nats(_ graph, dep string) bool { return strings.HasPrefix(dep, "github.com/nats-io/") }

// rigs are the test rigs: packages for tests only.
var rigs = []string{internal("testenv"), internal("deploytest"), internal("davtest"), internal("redminetest")}

// production reports whether path is a package of the module that is not a
// test rig.
func production(path string) bool {
	return (path == module || strings.HasPrefix(path, module+"/")) && !slices.Contains(rigs, path)
}

var rules = []rule{
	{line: "canon imports only the standard library", doc: internal("canon"),
		phrase:  "must never import anything but the standard library",
		applies: only(internal("canon")), refuses: notStandard},
	{line: "subjects imports nothing of NATS", doc: internal("subjects"),
		phrase:  "never import anything of NATS",
		applies: only(internal("subjects")), refuses: nats},
	{line: "gate imports nothing of NATS", doc: internal("gate"),
		phrase:  "never import anything of NATS",
		applies: only(internal("gate")), refuses: nats},
	{line: "document imports nothing of NATS", doc: internal("document"),
		phrase:  "never import anything of NATS",
		applies: only(internal("document")), refuses: nats},
	{line: "provider imports no document, gate or sign", doc: internal("provider"),
		phrase:  "import package document, gate or sign",
		applies: only(internal("provider")), refuses: anyOf(internal("document"), internal("gate"), internal("sign"))},
	{line: "metrics knows no gate", doc: internal("metrics"),
		phrase:  "never import the gate",
		applies: only(internal("metrics")), refuses: anyOf(internal("gate"))},
	{line: "executor does not import provider", doc: internal("executor"),
		phrase:  "never import package provider",
		applies: only(internal("executor")), refuses: anyOf(internal("provider"))},
	{line: "taskservice imports only the standard library", doc: module + "/taskservice",
		phrase:  "must never import anything of NATS, of Pebble or of the rest of this module",
		applies: only(module + "/taskservice"), refuses: notStandard},
	{line: "taskservice/redmine imports only the standard library and taskservice", doc: module + "/taskservice/redmine",
		phrase:  "must never import anything of NATS or Pebble, nor any package of this module but taskservice",
		applies: only(module + "/taskservice/redmine"),
		refuses: func(g graph, dep string) bool { return dep != module+"/taskservice" && !g.standard(dep) }},
	{line: "no production package imports a test rig", doc: internal("testenv"),
		phrase:  "must never be imported by a production package",
		applies: production, refuses: anyOf(rigs...)},
}

// violations returns every package of g that reaches a package a rule
// refuses, with the chain of imports that leads there.
func violations(g graph, rules []rule) []string {
	var out []string
	paths := make([]string, 0, len(g))
	for p := range g {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, r := range rules {
		for _, p := range paths {
			if !r.applies(p) {
				continue
			}
			order, via := g.reach(p)
			for _, dep := range order {
				if r.refuses(g, dep) {
					chain := append(via[dep][1:], dep)
					out = append(out, fmt.Sprintf("%s imports %s: %s", p, strings.Join(chain, " → "), r.line))
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
		if strings.HasPrefix(path, "internal/") || path == "taskservice" || strings.HasPrefix(path, "cmd/") || path == "send" {
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

func TestTheBoundaryCheckRefusesAForbiddenEdge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges []string
		want  string
	}{
		{"a graph that keeps every line passes",
			[]string{"internal/gate -> internal/canon", "internal/canon -> fmt", "internal/executor -> taskservice", "taskservice -> context",
				"cmd/executor -> internal/provider", "internal/provider -> github.com/cockroachdb/pebble/v2"}, ""},
		{"gate importing nats.go is refused",
			[]string{"internal/gate -> github.com/nats-io/nats.go"},
			"internal/gate imports github.com/nats-io/nats.go: gate imports nothing of NATS"},
		{"gate reaching NATS through another package is refused and the chain named",
			[]string{"internal/gate -> internal/topology", "internal/topology -> github.com/nats-io/nats.go/jetstream"},
			"internal/gate imports " + internal("topology") + " → github.com/nats-io/nats.go/jetstream"},
		{"document importing NATS is refused",
			[]string{"internal/document -> github.com/nats-io/nuid"}, "document imports nothing of NATS"},
		{"canon importing a module of its own is refused",
			[]string{"internal/canon -> golang.org/x/text/unicode/norm"}, "canon imports only the standard library"},
		{"provider importing the gate is refused",
			[]string{"internal/provider -> internal/gate"}, "provider imports no document, gate or sign"},
		{"provider reaching sign through canon is refused",
			[]string{"internal/provider -> internal/canon", "internal/canon -> internal/sign"}, "provider imports no document, gate or sign"},
		{"metrics importing the gate is refused",
			[]string{"internal/metrics -> internal/gate"}, "metrics knows no gate"},
		{"executor importing provider is refused",
			[]string{"internal/executor -> internal/provider"}, "executor does not import provider"},
		{"taskservice importing NATS is refused",
			[]string{"taskservice -> github.com/nats-io/nats.go"}, "taskservice imports only the standard library"},
		{"a command importing testenv is refused",
			[]string{"cmd/executor -> internal/testenv"}, "cmd/executor imports " + internal("testenv") + ": no production package imports a test rig"},
		{"a package reaching davtest through another is refused",
			[]string{"send -> internal/publish", "internal/publish -> internal/davtest"}, "no production package imports a test rig"},
		{"a test rig importing another rig is not a production import",
			[]string{"internal/testenv -> internal/deploytest"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(violations(fake(tc.edges...), rules), "\n")
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("refused:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Fatalf("got %q, want a refusal containing %q", got, tc.want)
			}
		})
	}
}

// load reads the module's import graph with go list.
func load(t *testing.T) graph {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
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
	if g[internal("gate")] == nil {
		t.Fatalf("go list listed %d packages, without %s", len(g), internal("gate"))
	}
	readSources(t, g)
	return g
}

// readSources reads the module's package directories and Go files. The
// test learns nothing from them that go list did not say, but go test then
// knows the result depends on them and runs the test again when an import
// changes, instead of reporting a cached pass.
func readSources(t *testing.T, g graph) {
	t.Helper()
	for path, p := range g {
		if p.Standard || !strings.HasPrefix(path, module) {
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

// packageDoc returns the package comment of the doc.go in dir, on one line.
func packageDoc(dir string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return "", err
	}
	if f.Doc == nil {
		return "", errors.New("doc.go has no package comment")
	}
	return strings.Join(strings.Fields(f.Doc.Text()), " "), nil
}

func TestNoPackageCrossesALineItsDocDraws(t *testing.T) {
	g := load(t)
	for _, v := range violations(g, rules) {
		t.Error(v)
	}
	for _, r := range rules {
		p := g[r.doc]
		if p == nil {
			t.Errorf("%s: package %s is not in the module", r.line, r.doc)
			continue
		}
		doc, err := packageDoc(p.Dir)
		if err != nil {
			t.Errorf("%s: %s: %v", r.line, r.doc, err)
			continue
		}
		if !strings.Contains(strings.ToLower(doc), strings.ToLower(r.phrase)) {
			t.Errorf("%s: %s/doc.go no longer says %q", r.line, r.doc, r.phrase)
		}
	}
}

func TestEveryPackageSaysWhatItMustNeverDo(t *testing.T) {
	g := load(t)
	for path, p := range g {
		if p.Standard || !strings.HasPrefix(path, module) || p.Name == "main" {
			continue
		}
		rel, _ := strings.CutPrefix(path, module+"/")
		doc, err := packageDoc(p.Dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			t.Errorf("%s has no doc.go", rel)
		case err != nil:
			t.Errorf("%s: %v", rel, err)
		case !strings.Contains(strings.ToLower(doc), "never"):
			t.Errorf("%s/doc.go does not say what the package must never do", rel)
		}
	}
}
