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
// files in dir names in a type: parameters, results, exported fields,
// type definitions and typed declarations.
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
						for _, n := range s.Names {
							if n.IsExported() {
								report(n.Name, s.Type)
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
	for _, dir := range []string{".", "../sendtest"} {
		for _, use := range internalUses(t, dir) {
			t.Error(use)
		}
	}
}
