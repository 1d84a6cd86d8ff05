package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"testing"
)

func TestExitCodesAndWhatIsReported(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		code   int
		output string
	}{
		{"success", nil, 0, ""},
		{"--help", flag.ErrHelp, 0, ""},
		{"a usage error", fmt.Errorf("%w: --wait must be positive", ErrUsage), 2, "cmd: usage: --wait must be positive\n"},
		{"a failure", errors.New("no server"), 1, "cmd: no server\n"},
		{"a failure of the package named like the command", errors.New("cmd: serving: no store"), 1, "cmd: serving: no store\n"},
		{"a failure already explained", fmt.Errorf("x: %w", ErrSilent), 1, ""},
		{"an exit status of the command's own", &ExitError{Code: 5, Err: errors.New("dead lettered")}, 5, "cmd: dead lettered\n"},
		{"an exit status already explained", &ExitError{Code: 3, Err: ErrSilent}, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := Report("cmd", tc.err, &out); code != tc.code || out.String() != tc.output {
				t.Errorf("Report: %d %q, want %d %q", code, out.String(), tc.code, tc.output)
			}
		})
	}
}

func TestAFlagErrorIsAUsageErrorPrintedOnceByTheFlagPackage(t *testing.T) {
	var out bytes.Buffer
	fs := NewFlagSet("serve", "Usage: cmd serve\n\n", &out)
	fs.Bool("embedded", false, "embedded")
	err := ParseNoArgs(fs, []string{"--nope"})
	if !errors.Is(err, ErrUsage) || !errors.Is(err, ErrSilent) {
		t.Fatalf("an unknown flag: %v", err)
	}
	if Report("cmd", err, io.Discard) != 2 {
		t.Error("an unknown flag does not exit 2")
	}
	if !bytes.Contains(out.Bytes(), []byte("Usage: cmd serve")) || !bytes.Contains(out.Bytes(), []byte("-nope")) {
		t.Errorf("printed %q", out.String())
	}
	out.Reset()
	err = ParseNoArgs(fs, []string{"extra"})
	if !errors.Is(err, ErrUsage) || errors.Is(err, ErrSilent) || !bytes.Contains(out.Bytes(), []byte("Usage: cmd serve")) {
		t.Errorf("a stray argument: %v, printed %q", err, out.String())
	}
	if err := ParseNoArgs(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}
