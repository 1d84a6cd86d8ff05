package cli

import (
	"bytes"
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
