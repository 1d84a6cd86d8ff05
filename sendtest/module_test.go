package sendtest_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The module as an application requires it, and a package of it that only
// the module itself may import.
const (
	sdk      = "github.com/sendtwice/sendtwice"
	internal = sdk + "/internal/gate"
)

// TestTheExamplesBuildInAnotherModule runs the public packages' Examples
// in a module of their own (testdata/app, module example.com/app) that
// requires this one by its path: what they import there, an application
// can import. Go refuses there any import of the module's internal
// packages, which the second part shows with one planted in a copy.
func TestTheExamplesBuildInAnotherModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	app := appModule(t, root)
	pkgs := copyExamples(t, root, app)
	for _, want := range []string{"send", "sendtest", "taskservice/redmine"} {
		if !strings.Contains(" "+strings.Join(pkgs, " ")+" ", " ./"+want+" ") {
			t.Fatalf("no Example of %s was copied (copied %v)", want, pkgs)
		}
	}

	// -ldflags=-w: no debug information, which halves the links' work.
	out, err := goIn(app, goBin, append([]string{"test", "-count=1", "-ldflags=-w", "-run", "^Example"}, pkgs...)...)
	if err != nil {
		t.Fatalf("the Examples fail in another module: %v\n%s", err, out)
	}
	t.Logf("in example.com/app:\n%s", out)
	for _, p := range pkgs {
		line := "ok  \texample.com/app/" + strings.TrimPrefix(p, "./")
		if !strings.Contains(out, line) || strings.Contains(out, "[no tests to run]") {
			t.Errorf("the Examples of %s did not run there:\n%s", p, out)
		}
	}

	t.Run("an internal import is refused there", func(t *testing.T) {
		example, err := os.ReadFile(filepath.Join(root, "send", "example_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		planted := bytes.Replace(example, []byte("import (\n"), []byte("import (\n\t_ \""+internal+"\"\n"), 1)
		if bytes.Equal(planted, example) {
			t.Fatal("send's Example has no import block to plant into")
		}
		write(t, filepath.Join(app, "planted", "example_test.go"), planted)
		out, err := goIn(app, goBin, "vet", "./planted/")
		want := "use of internal package " + internal + " not allowed"
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("an Example importing %s was not refused with %q (err %v):\n%s", internal, want, err, out)
		}
	})
}

// appModule copies testdata/app into a temporary directory, points its
// requirement of the module at root and gives it the module's go.sum.
func appModule(t *testing.T, root string) string {
	t.Helper()
	app := t.TempDir()
	mod, err := os.ReadFile(filepath.Join("testdata", "app", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(app, "go.mod"), append(mod, []byte("\nreplace "+sdk+" => "+root+"\n")...))
	write(t, filepath.Join(app, "go.sum"), sum)
	return app
}

// copyExamples copies every example*_test.go of each public package (a
// package of the module at any depth outside internal, cmd, testdata and
// deploy) into the same directory of app, and returns those directories
// ("./send", "./taskservice/redmine").
func copyExamples(t *testing.T, root, app string) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipped[d.Name()] || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if matched, _ := filepath.Match("example*_test.go", d.Name()); !matched {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		write(t, filepath.Join(app, rel), b)
		if pkg := "./" + filepath.ToSlash(filepath.Dir(rel)); !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// skipped are the directories whose packages are not the module's public
// API.
var skipped = map[string]bool{"internal": true, "cmd": true, "testdata": true, "deploy": true}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// goIn runs the go command in dir with nothing fetched: the module cache
// holds every dependency, and no workspace applies.
func goIn(dir, goBin string, args ...string) (string, error) {
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
