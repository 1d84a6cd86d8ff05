package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEveryCommandAnswersItsHelpAndVersionTheSameWay(t *testing.T) {
	for _, c := range []struct {
		arg, want string
	}{
		{"help", "Usage: tool\n"},
		{"-h", "Usage: tool\n"},
		{"-help", "Usage: tool\n"},
		{"--help", "Usage: tool\n"},
		{"version", "tool " + Version() + "\n"},
		{"-version", "tool " + Version() + "\n"},
		{"--version", "tool " + Version() + "\n"},
	} {
		t.Run(c.arg+" prints "+c.want, func(t *testing.T) {
			var out bytes.Buffer
			if !HelpOrVersion("tool", "Usage: tool\n", c.arg, &out) || out.String() != c.want {
				t.Fatalf("HelpOrVersion(%q) printed %q, want %q", c.arg, out.String(), c.want)
			}
		})
	}
	t.Run("any other argument is left to the command, printing nothing", func(t *testing.T) {
		var out bytes.Buffer
		if HelpOrVersion("tool", "Usage: tool\n", "serve", &out) || out.Len() != 0 {
			t.Fatalf("HelpOrVersion(%q) answered it, printing %q", "serve", out.String())
		}
	})
}

func TestTheHelpShowsTheFlagsByGroupWithTheirAliasesAndDefaults(t *testing.T) {
	var out bytes.Buffer
	fs := NewFlagSet("tool", "Usage: tool\n\n", &out)
	fs.Int("concurrency", 512, "deliveries handled at once")
	fs.String("id", "", "instance `ID`\nnamed in receipts")
	fs.String("data", "data-dir", "`DIR` of the store")
	fs.Bool("embedded", false, "run everything here")
	fs.Duration("wait", 2*time.Second, "how long to wait")
	var tlsCA string
	envStringVar(fs, nil, &tlsCA, "NO_SUCH_VARIABLE", "", []string{"tls-ca", "tlsca"}, "CA certificate `FILE`")
	Group(fs, "Store", "embedded", "data")
	Group(fs, "TLS", "tls-ca")
	if err := Parse(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	want := `Usage: tool

Store:
  --embedded
      run everything here
  --data DIR
      DIR of the store (default "data-dir")

TLS:
  --tls-ca, --tlsca FILE
      CA certificate FILE

Other flags:
  --concurrency INT
      deliveries handled at once (default 512)
  --id ID
      instance ID
      named in receipts
  --wait DURATION
      how long to wait (default 2s)
`
	if out.String() != want {
		t.Errorf("the help is\n%s\nwant\n%s", out.String(), want)
	}
}

func TestAFlagSetWithoutGroupsListsItsFlagsUnderFlags(t *testing.T) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	fs.Bool("json", false, "print JSON")
	fs.String("o", "", "write to `FILE`")
	var out bytes.Buffer
	PrintFlags(&out, fs)
	if want := "Flags:\n  --json\n      print JSON\n  -o FILE\n      write to FILE\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}

func TestNamingAFlagThatDoesNotExistIsAMistakeCaughtAtOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		mark func(*flag.FlagSet)
	}{
		{"a group", func(fs *flag.FlagSet) { Group(fs, "Store", "data", "no-such-flag") }},
		{"a repeatable flag", func(fs *flag.FlagSet) { Repeatable(fs, "no-such-flag") }},
	} {
		t.Run(c.name+" naming it panics, naming it", func(t *testing.T) {
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			fs.String("data", "", "")
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "--no-such-flag") {
					t.Errorf("recovered %v, want a panic naming --no-such-flag", r)
				}
			}()
			c.mark(fs)
		})
	}
}

func TestTheVersionIsTheReleaseUnlessTheBuildNamesATag(t *testing.T) {
	for _, c := range []struct {
		name, built, want string
	}{
		{"a build from a checkout prints the release", "(devel)", Release},
		{"a build without build information prints the release", "", Release},
		{"a pseudo-version of a commit prints the release", "v0.5.1-0.20261204164700-680a5f8abcde", Release},
		{"a pseudo-version before any tag prints the release", "v0.0.0-20261204164700-680a5f8abcde", Release},
		{"a build of a modified checkout prints the release", "v0.5.0+dirty", Release},
		{"a build of the release's tag prints the tag", "v0.5.0", "v0.5.0"},
		{"a build of a later tag prints that tag", "v0.6.0", "v0.6.0"},
		{"a build of a release candidate prints its tag", "v0.6.0-rc.1", "v0.6.0-rc.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := versionOf(c.built); got != c.want {
				t.Fatalf("versionOf(%q) = %q, want %q", c.built, got, c.want)
			}
		})
	}
	t.Run("the release is the one the CHANGELOG names", func(t *testing.T) {
		changelog, err := os.ReadFile("../../CHANGELOG.md")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(changelog), Release) {
			t.Errorf("CHANGELOG.md does not name the release %s", Release)
		}
	})
}
