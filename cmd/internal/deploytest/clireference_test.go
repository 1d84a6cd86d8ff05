package deploytest

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The command-line reference, docs/cli/PROGRAM.md: what each program's
// --help and each of its subcommands' --help print, generated from the
// built programs and compared byte for byte; -update rewrites it.

// cliPrograms are the programs of the reference.
var cliPrograms = []string{"executor", "publisher", "provider", "bench"}

// cliReferenceCommand is how the reference is made again.
const cliReferenceCommand = "go test ./cmd/internal/deploytest -run TestTheCLIReferenceIsWhatTheProgramsPrint -update"

// subcommandsOf returns the subcommands a program's usage names, in its
// order: its indented lines "PROGRAM NAME …", and the modes of a line
// "Usage: PROGRAM [a|b] …".
func subcommandsOf(program, usage string) []string {
	var subs []string
	for _, line := range strings.Split(usage, "\n") {
		if modes, ok := strings.CutPrefix(line, "Usage: "+program+" ["); ok {
			modes, _, _ = strings.Cut(modes, "]")
			subs = append(subs, strings.Split(modes, "|")...)
			continue
		}
		words := strings.Fields(line)
		if strings.HasPrefix(line, " ") && len(words) > 1 && words[0] == program && !strings.HasPrefix(words[1], "-") {
			subs = append(subs, words[1])
		}
	}
	return subs
}

// helpEnvironments are two environments, working directories and HOMEs
// as unlike as a machine's and another's: the help must read the same in
// both.
func helpEnvironments(t *testing.T) (dirs [2]string, envs [2][]string) {
	other := map[string]string{
		"USER": "someone-else", "LOGNAME": "someone-else", "TZ": "Pacific/Chatham", "COLUMNS": "40",
		"CALDAV_PASSWORD": "caldav-pw-1d7e", "REDMINE_API_KEY": "redmine-key-93ac",
		"SENDTWICE_TRUSTED_APPROVERS": "/trusted-2b8f.json", "NATS_INBOX_PREFIX": "_INBOX_OTHER",
	}
	maps.Copy(other, secretEnv)
	for i := range dirs {
		dirs[i] = t.TempDir()
		envs[i] = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dirs[i], "LANG=C.UTF-8"}
	}
	for k, v := range other {
		envs[1] = append(envs[1], k+"="+v)
	}
	return dirs, envs
}

// helpOf runs "program args… --help" in each environment and returns what
// it printed, the same in both or else an error; it must exit 0 and name
// no directory of the machine.
func helpOf(bin, program string, dirs [2]string, envs [2][]string, args ...string) (string, error) {
	var outs [2][]byte
	for i := range envs {
		cmd := exec.Command(filepath.Join(bin, program), append(args, "--help")...)
		cmd.Dir, cmd.Env = dirs[i], envs[i]
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %s --help: %w\n%s", program, strings.Join(args, " "), err, out)
		}
		outs[i] = out
	}
	what := strings.TrimSpace(program + " " + strings.Join(args, " ") + " --help")
	if !bytes.Equal(outs[0], outs[1]) {
		a, b := firstDifference(string(outs[0]), string(outs[1]))
		return "", fmt.Errorf("%s prints another help in another environment:\n  %s\n  %s", what, a, b)
	}
	for _, dir := range []string{bin, dirs[0], os.TempDir()} {
		if bytes.Contains(outs[0], []byte(dir)) {
			return "", fmt.Errorf("%s prints a directory of this machine, %s:\n%s", what, dir, outs[0])
		}
	}
	if bytes.Contains(outs[0], []byte("```")) {
		return "", fmt.Errorf("%s prints a Markdown fence, which would end its block", what)
	}
	return strings.TrimRight(string(outs[0]), "\n") + "\n", nil
}

// firstDifference returns the first line where a and b differ, each with
// its number.
func firstDifference(a, b string) (string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: %q", i+1, x), fmt.Sprintf("line %d: %q", i+1, y)
		}
	}
	return "", ""
}

// cliReference renders the reference of one program.
func cliReference(bin, program string, dirs [2]string, envs [2][]string) (string, error) {
	usage, err := helpOf(bin, program, dirs, envs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n<!-- generated from the programs' --help by %s; do not edit -->\n\n", program, cliReferenceCommand)
	fmt.Fprintf(&b, "What `%s --help` and each subcommand's `--help` print. The overview of every program is in [CLI.md](../CLI.md).\n\n", program)
	section := func(title, help string) {
		fmt.Fprintf(&b, "## %s\n\n```text\n%s```\n", title, help)
	}
	subs := subcommandsOf(program, usage)
	if len(subs) > 0 {
		links := make([]string, len(subs))
		for i, sub := range subs {
			links[i] = fmt.Sprintf("[%s](#%s-%s)", sub, program, sub)
		}
		fmt.Fprintf(&b, "Subcommands: %s.\n\n", strings.Join(links, ", "))
	}
	section(program, usage)
	for _, sub := range subs {
		help, err := helpOf(bin, program, dirs, envs, sub)
		if err != nil {
			return "", err
		}
		if help == usage { // a mode with the program's own flags (bench live)
			fmt.Fprintf(&b, "\n`%s %s --help` prints the same as `%s --help`.\n", program, sub, program)
			continue
		}
		b.WriteString("\n")
		section(program+" "+sub, help)
	}
	return b.String(), nil
}

func TestTheCLIReferenceIsWhatTheProgramsPrint(t *testing.T) {
	bin := builtCommands(t)
	dirs, envs := helpEnvironments(t)
	overview, err := os.ReadFile(filepath.Join(repoRoot, "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, program := range cliPrograms {
		t.Run(program, func(t *testing.T) {
			got, err := cliReference(bin, program, dirs, envs)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(repoRoot, "docs", "cli", program+".md")
			if !bytes.Contains(overview, []byte("(cli/"+program+".md)")) {
				t.Errorf("docs/CLI.md does not link cli/%s.md", program)
			}
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (write it with %s)", err, cliReferenceCommand)
			}
			if got != string(want) {
				a, b := firstDifference(got, string(want))
				t.Errorf("docs/cli/%s.md is not what the programs print (write it again with %s):\n  printed  %s\n  the file %s", program, cliReferenceCommand, a, b)
			}
		})
	}
}

func TestSubcommandsAreReadFromTheUsage(t *testing.T) {
	for _, c := range []struct{ program, usage, want string }{
		{"executor", "Usage:\n  executor serve [--server URL]\n                 [--data DIR]\n  executor demo [--verbose]\n  executor --version\n", "serve demo"},
		{"provider", "Usage:\n\n  provider serve   [--server URL]\n  provider stats   [--json]\n\nSubcommands:\n\n  serve    run the service\n", "serve stats"},
		{"bench", "Usage: bench [backlog|live] [--embedded | --server URL] [flags]\n       bench --version\n", "backlog live"},
		{"publisher", "publisher: make approvals\n\nRun 'publisher COMMAND --help' for a command's flags.\n", ""},
	} {
		if got := strings.Join(subcommandsOf(c.program, c.usage), " "); got != c.want {
			t.Errorf("%s: subcommands %q, want %q", c.program, got, c.want)
		}
	}
}

func TestAHelpThatVariesOrFailsIsRefused(t *testing.T) {
	bin := t.TempDir()
	dirs, envs := helpEnvironments(t)
	for _, c := range []struct{ name, script, err string }{
		{"a help that reads the same everywhere is taken", `echo "Usage: fixed"`, ""},
		{"a default from the environment is refused", `echo "default ${NATS_URL:-none}"`, "prints another help in another environment"},
		{"a default from the user is refused", `echo "default ${USER:-none}"`, "prints another help in another environment"},
		{"the working directory is refused", `pwd`, "prints another help in another environment"},
		{"the program's own path is refused", `echo "Usage of $0"`, "prints a directory of this machine"},
		{"a help that exits non-zero is refused", `echo usage; exit 2`, "exit status 2"},
		{"a Markdown fence is refused", "echo '```'", "prints a Markdown fence"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(bin, "prog"), []byte("#!/bin/sh\n"+c.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := helpOf(bin, "prog", dirs, envs)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("error %v, want %q", err, c.err)
			}
		})
	}
}
