package sendtest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exposed lists the internal packages' names that the exported API of
// the package in dir mentions (its exported functions, methods, types,
// fields, constants and variables), as "file: pkg.Name".
func exposed(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(path, "/internal/") {
				continue
			}
			local := filepath.Base(path)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			internal[local] = true
		}
		look := func(n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				if s, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := s.X.(*ast.Ident); ok && internal[x.Name] {
						found = append(found, filepath.Base(name)+": "+x.Name+"."+s.Sel.Name)
					}
				}
				return true
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && (d.Recv == nil || receiverExported(d.Recv)) {
					look(d.Type)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							lookExported(s.Type, look)
						}
					case *ast.ValueSpec:
						if slices.ContainsFunc(s.Names, (*ast.Ident).IsExported) {
							look(s)
						}
					}
				}
			}
		}
	}
	return found
}

func receiverExported(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// lookExported looks at a type's exported fields and methods only.
func lookExported(typ ast.Expr, look func(ast.Node)) {
	var fields *ast.FieldList
	switch t := typ.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		look(typ)
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 || slices.ContainsFunc(f.Names, (*ast.Ident).IsExported) {
			look(f.Type)
		}
	}
}

func TestTheKitExposesNoInternalType(t *testing.T) {
	if got := exposed(t, "."); len(got) > 0 {
		t.Errorf("sendtest's exported API names internal packages: %v", got)
	}

	planted := t.TempDir()
	src := `package kit

import "github.com/sendtwice/sendtwice/internal/embedded"

type Kit struct {
	Stack *embedded.Stack
	dir   embedded.Options
}

func (k *Kit) Options() embedded.Options { return k.dir }
`
	if err := os.WriteFile(filepath.Join(planted, "kit.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{"kit.go: embedded.Stack", "kit.go: embedded.Options"}
	if got := exposed(t, planted); !slices.Equal(got, want) {
		t.Errorf("a planted API exposing internal types gives %v, want %v", got, want)
	}
}
