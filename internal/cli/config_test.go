package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// configFlags is a flag set with a flag of each kind a configuration file
// sets: a string, a bool, an int, a duration, a repeatable one, and the
// NATS connection's (an alias and a secret among them).
type configFlags struct {
	fs      *flag.FlagSet
	name    *string
	on      *bool
	n       *int
	wait    *time.Duration
	dests   []string
	conn    *ConnConfig
	cfgFile *string
}

func newConfigFlags() *configFlags {
	c := &configFlags{fs: NewFlagSet("tool", "", io.Discard)}
	c.name = c.fs.String("name", "default", "a `NAME`")
	c.on = c.fs.Bool("on", false, "a switch")
	c.n = c.fs.Int("n", 1, "a number")
	c.wait = c.fs.Duration("wait", time.Second, "a duration")
	c.fs.Func("dest", "a destination (repeatable)", func(s string) error { c.dests = append(c.dests, s); return nil })
	Repeatable(c.fs, "dest")
	c.conn = ConnFlagsEnv(c.fs, envOf(nil))
	c.cfgFile = c.fs.String("config", "", "the configuration `FILE`")
	return c
}

// applyConfig parses args, then applies the configuration file holding
// content.
func applyConfig(t *testing.T, content string, args ...string) (*configFlags, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tool.conf")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newConfigFlags()
	if err := Parse(c.fs, args); err != nil {
		t.Fatal(err)
	}
	return c, path, ApplyConfigFile(c.fs, path)
}

func TestAConfigurationFileSetsTheFlagsTheCommandLineLeavesOut(t *testing.T) {
	content := `# a comment, then a blank line

name = "two words\twith a tab"
on = true
  n=7  
wait = 3s
dest = a=https://a.example/
dest = b=https://b.example/
tlsca = /etc/ca.pem
server = nats://from-file:4222
`
	c, _, err := applyConfig(t, content, "--n", "9", "--tls-ca", "/cli/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if *c.name != "two words\twith a tab" || !*c.on || *c.wait != 3*time.Second || c.conn.Server != "nats://from-file:4222" {
		t.Errorf("name %q, on %v, wait %v, server %q", *c.name, *c.on, *c.wait, c.conn.Server)
	}
	if want := []string{"a=https://a.example/", "b=https://b.example/"}; !reflect.DeepEqual(c.dests, want) {
		t.Errorf("dest %q, want %q", c.dests, want)
	}
	if *c.n != 9 || c.conn.TLSCA != "/cli/ca.pem" {
		t.Errorf("the command line does not win: n %d, tls-ca %q", *c.n, c.conn.TLSCA)
	}
}

// A refusal names the file, the line and why. Every refusal but a value's
// comes before any flag is set; a refused value stops the file there (and
// the command does not run).
func TestAConfigurationFileIsRefusedNamingTheLineAndWhy(t *testing.T) {
	for _, c := range []struct {
		name    string
		content string // of the file
		says    string // the error
	}{
		{"an unknown key is refused", "n = 2\ncaldav-password = hunter2\n", "tool.conf:2: caldav-password: unknown key"},
		{"a flag given twice is refused", "n = 2\n\nn = 3\n", "tool.conf:3: n: given twice (first on line 1)"},
		{"a flag given twice through its alias is refused", "tls-ca = /a\ntlsca = /b\n", "tool.conf:2: tlsca: given twice (first on line 1)"},
		{"a bad value is refused", "wait = soon\nn = 2\n", `tool.conf:1: wait: the value "soon" is refused`},
		{"a bad bool is refused", "on = maybe\n", `tool.conf:1: on: the value "maybe" is refused`},
		{"another configuration file is refused", "config = other.conf\n", "tool.conf:1: config: a configuration file cannot name another"},
		{"the NATS password is refused as a secret", "n = 2\npassword = hunter2\n", "tool.conf:2: password: a secret stays out of the configuration file: give it in $NATS_PASSWORD"},
		{"a line without = is refused", "n 2\n", `tool.conf:1: "n 2": want name = value`},
		{"a line without a name is refused", " = 2\n", "tool.conf:1: no name before ="},
		{"a name with dashes is refused", "--n = 2\n", "tool.conf:1: --n: write the flag's name without dashes"},
		{"a name of two words is refused", "n n = 2\n", `tool.conf:1: "n n": a name is one word`},
		{"a bad quoted value is refused", "name = \"open\n", "tool.conf:1: name: the value \"open is not a Go string"},
		{"a quoted value with more after it is refused", "name = \"a\" b\n", "tool.conf:1: name: the value \"a\" b is not a Go string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, path, err := applyConfig(t, c.content)
			if err == nil || !strings.HasPrefix(err.Error(), filepath.Dir(path)+string(filepath.Separator)) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v, want an error with the file's path saying %q", err, c.says)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the secret: %v", err)
			}
			if *f.n != 1 || f.conn.TLSCA != "" {
				t.Errorf("a refused file set a flag it names: n %d, tls-ca %q", *f.n, f.conn.TLSCA)
			}
		})
	}
	t.Run("a missing file is refused, naming it", func(t *testing.T) {
		c := newConfigFlags()
		missing := filepath.Join(t.TempDir(), "missing.conf")
		if err := ApplyConfigFile(c.fs, missing); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("%v, want an error naming %s", err, missing)
		}
	})
}

// FuzzParseConfig: any file either is refused or parses into lines that
// written back, each value quoted, parse into the same lines.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"", "# c\n\nname = v\n", "a=b\r\nc = \"d\\te\"\n", "x = \"unterminated\n", "= v\n", "-a = b\n",
		"a = b = c\n", "a\n", "a = \"\\u00e9\" \n", "  # x = y\n", "a = 'q'\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := parseConfig("f", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		var again strings.Builder
		for _, l := range lines {
			if l.name == "" || strings.ContainsAny(l.name, "= \t\"") || strings.HasPrefix(l.name, "-") || strings.HasPrefix(l.name, "#") {
				t.Fatalf("line %d: a bad name %q was taken", l.line, l.name)
			}
			again.WriteString(l.name + " = " + strconv.Quote(l.value) + "\n")
		}
		relines, err := parseConfig("f", []byte(again.String()))
		if err != nil {
			t.Fatalf("written back, it is refused: %v\n%s", err, again.String())
		}
		if len(relines) != len(lines) {
			t.Fatalf("written back, %d lines became %d", len(lines), len(relines))
		}
		for i := range lines {
			if lines[i].name != relines[i].name || lines[i].value != relines[i].value {
				t.Fatalf("written back, %q = %q became %q = %q", lines[i].name, lines[i].value, relines[i].name, relines[i].value)
			}
		}
	})
}
