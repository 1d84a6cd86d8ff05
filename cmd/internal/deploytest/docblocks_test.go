package deploytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/jaegertest"
	"github.com/sendtwice/sendtwice/internal/redminetest"
)

// The documentation's shell blocks, as CONTRIBUTING.md states the
// convention: a block fenced ```sh in README.md or in docs/*.md is run, a
// block fenced ```console (commands a reader types that need root, a
// container engine, other machines or the network) or ```text is shown
// only. A run block whose first line is "# needs: NAME" runs with the
// server NAME started by the test and its address in the environment (see
// blockNeeds).

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../../.."

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file string // relative to the repository's root, as docs/CALDAV.md
	line int    // the opening fence's line, from 1
	lang string // the first word of the fence's info string
	text string // the lines between the fences, without the fence's indentation
}

// runLang is the fence of the blocks that are run.
const runLang = "sh"

// unmarkedLangs are fences that would leave a reader unsure whether the
// block is run: a shell block is either run (sh) or shown (console).
var unmarkedLangs = map[string]bool{"bash": true, "shell": true, "zsh": true, "shell-session": true}

var needsLine = regexp.MustCompile(`^# needs: ([a-z]+)\b`)

// needs is the server the block needs ("" for none), from its first line.
func (b docBlock) needs() string {
	first, _, _ := strings.Cut(b.text, "\n")
	if m := needsLine.FindStringSubmatch(first); m != nil {
		return m[1]
	}
	return ""
}

// name is the block's place, as file:line.
func (b docBlock) name() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// numbered is the block's text with each line's number in its file.
func (b docBlock) numbered() string {
	var s strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(b.text, "\n"), "\n") {
		fmt.Fprintf(&s, "%5d  %s\n", b.line+1+i, l)
	}
	return s.String()
}

// fencedBlocks returns the fenced code blocks of a Markdown file, indented
// ones (in a list item) too.
func fencedBlocks(file string, data []byte) ([]docBlock, error) {
	var blocks []docBlock
	var open *docBlock
	indent := ""
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if open == nil {
			if info, ok := strings.CutPrefix(trimmed, "```"); ok {
				lang, _, _ := strings.Cut(strings.TrimSpace(info), " ")
				open = &docBlock{file: file, line: i + 1, lang: lang}
				indent = line[:len(line)-len(trimmed)]
			}
			continue
		}
		if trimmed == "```" {
			blocks = append(blocks, *open)
			open = nil
			continue
		}
		open.text += strings.TrimPrefix(line, indent) + "\n"
	}
	if open != nil {
		return nil, fmt.Errorf("%s: the block opened on line %d is never closed", file, open.line)
	}
	return blocks, nil
}

// documentationBlocks returns the blocks of README.md and docs/*.md.
func documentationBlocks(t *testing.T) []docBlock {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	for _, path := range append([]string{filepath.Join(repoRoot, "README.md")}, docs...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, path)
		bs, err := fencedBlocks(filepath.ToSlash(rel), data)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, bs...)
	}
	return blocks
}

// goShim is the command "go" as the blocks run it: "go run" and
// "go build -o DIR/" of the four programs use the binaries the test built;
// "go test" is not run, as the blocks' "go test" is the test suite, which
// runs this test; anything else is refused.
const goShim = `#!/bin/bash
# go, as the documentation test runs the documentation's blocks.
bin=%q
program() {
	case "$1" in
	./cmd/executor | ./cmd/publisher | ./cmd/provider | ./bench/cmd/bench) echo "${1##*/}" ;;
	*) return 1 ;;
	esac
}
case "$1" in
run)
	if p=$(program "$2"); then
		shift 2
		exec "$bin/$p" "$@"
	fi
	;;
build)
	if [ "$2" = -o ]; then
		out=$3
		shift 3
		mkdir -p "$out"
		for pkg; do
			p=$(program "$pkg") || { echo "go (documentation test): no program $pkg to build" >&2; exit 1; }
			cp "$bin/$p" "$out/"
		done
		exit 0
	fi
	;;
test)
	echo "go (documentation test): not run, it is the test suite itself: go $*" >&2
	exit 0
	;;
esac
echo "go (documentation test): only 'go run' and 'go build -o DIR/' of ./cmd/executor, ./cmd/publisher, ./cmd/provider and ./bench/cmd/bench run here, not: go $*" >&2
exit 127
`

// blockNeeds starts, for a block whose first line is "# needs: NAME", the
// server NAME, and returns what the block reads of it from the
// environment. Each skips the test when its server is not installed, and
// fails it under CI=true.
var blockNeeds = map[string]func(t *testing.T) []string{
	// Radicale with a login: $CALDAV_URL is the calendar collection of
	// $CALDAV_USER, whose password is $CALDAV_PASSWORD (which the executor
	// reads when no --caldav-password-file is given).
	"radicale": func(t *testing.T) []string {
		const user, password = "alice", "docs-password-5e1b"
		s := davtest.Start(t, davtest.Radicale, davtest.Options{User: user, Password: password})
		return []string{"CALDAV_URL=" + s.CollectionURL, "CALDAV_USER=" + user, "CALDAV_PASSWORD=" + password}
	},
	// A private Redmine: $REDMINE_URL, its project $REDMINE_PROJECT (with
	// the key field made) and an administrator's $REDMINE_API_KEY.
	"redmine": func(t *testing.T) []string {
		s := redminetest.Start(t, redminetest.Options{})
		return []string{"REDMINE_URL=" + s.URL + "/", "REDMINE_PROJECT=" + s.Project, "REDMINE_API_KEY=" + s.APIKey}
	},
	// A private Jaeger: $OTEL_EXPORTER_OTLP_ENDPOINT, its OTLP/HTTP
	// receiver, where the programs send their spans, and $JAEGER_URL, its
	// UI and query API.
	"jaeger": func(t *testing.T) []string {
		j := jaegertest.Start(t)
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPEndpoint, "JAEGER_URL=" + j.UI}
	},
}

// Time a block may take: one with a server of its own does more (a probe,
// a demo against it).
const (
	blockTimeout      = 2 * time.Minute
	needsBlockTimeout = 5 * time.Minute
)

func TestTheDocumentationsShellBlocksRun(t *testing.T) {
	blocks := documentationBlocks(t)
	ran := 0
	for _, b := range blocks {
		if unmarkedLangs[b.lang] {
			t.Errorf("%s: a block fenced %q is neither run nor shown only: fence it %s (run by this test) or console (shown)", b.name(), b.lang, runLang)
		}
		if b.lang == runLang {
			if need := b.needs(); need != "" && blockNeeds[need] == nil {
				t.Errorf("%s: # needs: %s names no server this test can start", b.name(), need)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatalf("no block fenced %s in README.md or docs/: the convention is not being followed", runLang)
	}
	bin := builtCommands(t)
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "go"), fmt.Appendf(nil, goShim, bin), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.lang != runLang {
			continue
		}
		t.Run(b.name(), func(t *testing.T) {
			var extra []string
			timeout := blockTimeout
			if need := blockNeeds[b.needs()]; need != nil {
				extra, timeout = need(t), needsBlockTimeout
			}
			dir := t.TempDir()
			output, took, err := runBlock(b, dir, shim, extra, timeout)
			if err != nil {
				t.Fatalf("%s: %v\n--- the block\n%s--- its output\n%s%s", b.name(), err, b.numbered(), output, logsIn(dir))
			}
			t.Logf("%s ran in %v", b.name(), took)
		})
	}
}

// blockEnv is the environment a block runs in: nothing of the test's own
// (no $NATS_URL, no credentials), the shim first on PATH, HOME the block's
// directory, and what its server set.
func blockEnv(dir, shim string, extra []string) []string {
	env := []string{
		"PATH=" + shim + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + dir,
		"LANG=C.UTF-8",
		"TMPDIR=" + os.TempDir(),
	}
	return append(env, extra...)
}

// runBlock runs the block with bash (set -euo pipefail) in dir, which
// holds a copy of the repository's testdata/, and returns its output and
// how long it took; the error says why the block failed: it exited
// non-zero, outlasted its timeout, or left a process running.
func runBlock(b docBlock, dir, shim string, extra []string, timeout time.Duration) ([]byte, time.Duration, error) {
	if err := os.CopyFS(filepath.Join(dir, "testdata"), os.DirFS(filepath.Join(repoRoot, "testdata"))); err != nil {
		return nil, 0, err
	}
	script := filepath.Join(dir, ".block.sh")
	if err := os.WriteFile(script, []byte("set -euo pipefail\n"+b.text), 0o600); err != nil {
		return nil, 0, err
	}
	// The output goes to a file, so that a process the block left running
	// with the output open cannot hold up the wait.
	out, err := os.CreateTemp("", "block-output-")
	if err != nil {
		return nil, 0, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, blockEnv(dir, shim, extra), out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, to find what it leaves
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	runErr := cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	timedOut := ctx.Err() != nil
	left := stopLeftovers(cmd.Process.Pid)
	output, _ := os.ReadFile(out.Name())
	switch {
	case timedOut:
		return output, took, fmt.Errorf("the block did not finish within %v", timeout)
	case runErr != nil:
		return output, took, fmt.Errorf("the block failed after %v: %w", took, runErr)
	case left != nil:
		return output, took, fmt.Errorf("%w: a block stops what it starts", left)
	}
	return output, took, nil
}

// logsIn returns the end of each log file (*.log) a block wrote in dir:
// those of the processes it ran in the background.
func logsIn(dir string) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var s strings.Builder
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if len(data) > 4000 {
			data = append([]byte("…"), data[len(data)-4000:]...)
		}
		fmt.Fprintf(&s, "--- the end of %s\n%s", filepath.Base(l), data)
	}
	return s.String()
}

// stopLeftovers waits a moment for the processes still in the block's
// process group to end, then kills them and says so.
func stopLeftovers(pgid int) error {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) != nil {
			return nil
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return errors.New("the block left processes running (killed now)")
}

func TestFencedBlocksAreFoundWithTheirLinesAndIndentation(t *testing.T) {
	doc := "# t\n\n```sh\necho a\n```\n\n- item\n\n  ```console\n  # needs: radicale\n  echo b\n  ```\n"
	blocks, err := fencedBlocks("x.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{file: "x.md", line: 3, lang: "sh", text: "echo a\n"},
		{file: "x.md", line: 9, lang: "console", text: "# needs: radicale\necho b\n"},
	}
	if fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Fatalf("blocks %+v, want %+v", blocks, want)
	}
	if blocks[0].needs() != "" || blocks[1].needs() != "radicale" {
		t.Errorf("needs %q and %q, want none and radicale", blocks[0].needs(), blocks[1].needs())
	}
	if _, err := fencedBlocks("x.md", []byte("```sh\necho a\n")); err == nil || !strings.Contains(err.Error(), "line 1 is never closed") {
		t.Errorf("an unclosed block: %v", err)
	}
	if !strings.Contains(blocks[1].numbered(), "   11  echo b") {
		t.Errorf("numbered:\n%s", blocks[1].numbered())
	}
}

func TestABlockThatFailsHangsOrLeavesAProcessIsRefused(t *testing.T) {
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "go"), fmt.Appendf(nil, goShim, t.TempDir()), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, text, err, output string }{
		{"a block whose commands all succeed passes", "echo hello\ntest -f testdata/seed/request.json\n", "", "hello"},
		{"a block with a failing command fails, even when a later one succeeds", "false\necho after\n", "the block failed", ""},
		{"a failure inside a pipeline fails the block", "false | cat\n", "the block failed", ""},
		{"an unset variable fails the block", "echo \"$NO_SUCH_VARIABLE\"\n", "the block failed", "unbound variable"},
		{"a block that outlasts its timeout is stopped", "sleep 30\n", "did not finish within", ""},
		{"a block that leaves a process running fails", "sleep 30 &\n", "left processes running", ""},
		{"a block that starts a process and stops it passes", "sleep 30 &\nkill %1\nwait || true\n", "", ""},
		{"go test is not run", "go test -race ./...\necho after\n", "", "not run, it is the test suite itself"},
		{"another go command is refused", "go vet ./...\n", "the block failed", "only 'go run'"},
		{"the test's environment does not reach the block", "test -z \"${NATS_URL:-}\"\n", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NATS_URL", "nats://127.0.0.1:1")
			b := docBlock{file: "x.md", line: 1, lang: runLang, text: c.text}
			output, _, err := runBlock(b, t.TempDir(), shim, nil, 2*time.Second)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("error %v, want %q\n%s", err, c.err, output)
			}
			if !strings.Contains(string(output), c.output) {
				t.Errorf("output %q, want it to contain %q", output, c.output)
			}
		})
	}
}

func TestAFailedBlockShowsTheLogsItWrote(t *testing.T) {
	dir := t.TempDir()
	b := docBlock{file: "x.md", line: 1, lang: runLang, text: "echo 'address in use' > serve.log\nfalse\n"}
	if _, _, err := runBlock(b, dir, t.TempDir(), nil, 10*time.Second); err == nil {
		t.Fatal("the block passed")
	}
	if got := logsIn(dir); got != "--- the end of serve.log\naddress in use\n" {
		t.Errorf("logs %q", got)
	}
}
