package deploytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built holds the commands, built once for every test of the package that
// runs them (TestMain removes them).
var built struct {
	once sync.Once
	dir  string
	err  error
}

// builtCommands returns the directory of the built commands (executor,
// publisher, provider and bench), building them on the first call; with
// -short the test is skipped.
func builtCommands(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the commands")
	}
	built.once.Do(func() { built.dir, built.err = buildCommands() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// buildCommands builds the commands into a new temporary directory.
func buildCommands() (string, error) {
	dir, err := os.MkdirTemp("", "deploytest-bin-")
	if err != nil {
		return "", fmt.Errorf("making a directory for the commands: %w", err)
	}
	out := dir + string(filepath.Separator)
	// The bench is a module of its own (bench/): it is built there.
	for _, cmd := range []*exec.Cmd{
		exec.Command("go", "build", "-o", out, "../../executor", "../../publisher", "../../provider"),
		exec.Command("go", "build", "-C", "../../../bench", "-o", out, "./cmd/bench"),
	} {
		if b, err := cmd.CombinedOutput(); err != nil {
			return dir, fmt.Errorf("building the commands: %w\n%s", err, b)
		}
	}
	return dir, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
