package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
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
  --concurrency int
      deliveries handled at once (default 512)
  --id ID
      instance ID
      named in receipts
  --wait duration
      how long to wait (default 2s)
`
	if out.String() != want {
		t.Errorf("the help is\n%s\nwant\n%s", out.String(), want)
	}
}

func TestAFlagSetWithoutGroupsListsItsFlagsUnderFlags(t *testing.T) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	fs.Bool("json", false, "print JSON")
	var out bytes.Buffer
	PrintFlags(&out, fs)
	if want := "Flags:\n  --json\n      print JSON\n"; out.String() != want {
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
