package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
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
