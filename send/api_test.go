package send_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// internalUses returns the internal packages that the exported API of the
// files in dir names: parameters, results, exported fields, type
// definitions, and the types and initial values of exported variables and
// constants.
func internalUses(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		name := filepath.Join(dir, e.Name())
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(path, "/internal/") {
				alias := path[strings.LastIndex(path, "/")+1:]
				if imp.Name != nil {
					alias = imp.Name.Name
				}
				internal[alias] = true
			}
		}
		report := func(where string, expr ast.Node) {
			if expr == nil {
				return
			}
			ast.Inspect(expr, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
						out = append(out, name+": "+where+" names "+id.Name+"."+sel.Sel.Name)
					}
				}
				return true
			})
		}
		fields := func(where string, fl *ast.FieldList, exportedOnly bool) {
			if fl == nil {
				return
			}
			for _, fd := range fl.List {
				exported := len(fd.Names) == 0
				for _, n := range fd.Names {
					exported = exported || n.IsExported()
				}
				if exported || !exportedOnly {
					report(where, fd.Type)
				}
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); ok && !id.IsExported() {
						continue
					}
				}
				fields(d.Name.Name, d.Type.Params, false)
				fields(d.Name.Name, d.Type.Results, false)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						switch ty := s.Type.(type) {
						case *ast.StructType:
							fields(s.Name.Name, ty.Fields, true)
						case *ast.InterfaceType:
							fields(s.Name.Name, ty.Methods, true)
						default:
							report(s.Name.Name, s.Type)
						}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							report(n.Name, s.Type)
							switch {
							case len(s.Values) == len(s.Names):
								report(n.Name, s.Values[i])
							default: // one call for every name
								for _, v := range s.Values {
									report(n.Name, v)
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

func TestThePublicAPINamesNoInternalType(t *testing.T) {
	for _, dir := range []string{".", "../sendtest", "../approval", "../taskservice/servicetest"} {
		for _, use := range internalUses(t, dir) {
			t.Error(use)
		}
	}
}

// The check sees an internal name wherever the exported API could carry
// one: a planted file that leaks through a parameter, a result, an
// exported field, a type, and an exported variable's initial value is
// reported for each, and its unexported parts are not.
func TestTheAPICheckReportsAPlantedInternalName(t *testing.T) {
	dir := t.TempDir()
	src := `package planted

import (
	"github.com/sendtwice/sendtwice/internal/gate"
	g "github.com/sendtwice/sendtwice/internal/sign"
)

var ErrX = gate.ErrY

var errHidden = gate.ErrY

const Limit = g.Max

var A, B = gate.Pair()

func Take(k *g.Key) {}

func Give() gate.Verdict { return gate.Verdict{} }

type Shown struct {
	V      gate.Verdict
	hidden g.Key
}

type Alias = gate.Verdict
`
	if err := os.WriteFile(filepath.Join(dir, "planted.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(internalUses(t, dir), "\n")
	for _, want := range []string{"ErrX names gate.ErrY", "Limit names g.Max", "A names gate.Pair", "B names gate.Pair",
		"Take names g.Key", "Give names gate.Verdict", "Shown names gate.Verdict", "Alias names gate.Verdict"} {
		if !strings.Contains(got, want) {
			t.Errorf("the check does not report %q; it reports:\n%s", want, got)
		}
	}
	if strings.Contains(got, "errHidden") || strings.Count(got, "g.Key") != 1 {
		t.Errorf("the check reports an unexported name:\n%s", got)
	}
}
