package main

import (
	"fmt"
	"io"

	"github.com/sendtwice/sendtwice/internal/canon"
)

func runDigest(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("digest", "digest [--canonical] FILE|-\n\nPrints the canonical digest (sha256: + hex of SHA-256 over RFC 8785 JSON) of a JSON document,\nor with --canonical its canonical bytes. - reads standard input. A number that JCS would round\n(more digits than a double holds, such as 9007199254740993) is refused, as the executors refuse it.", stderr)
	canonical := fs.Bool("canonical", false, "print the canonical JSON bytes instead of the digest")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr(fs, "digest takes exactly one FILE (or - for standard input)")
	}
	data, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		return fmt.Errorf("reading %s: %w", fs.Arg(0), err)
	}
	if *canonical {
		out, err := canon.CanonicalizeExact(data)
		if err != nil {
			return fmt.Errorf("canonicalising %s: %w", fs.Arg(0), err)
		}
		_, err = stdout.Write(out)
		return err
	}
	d, err := canon.DigestExact(data)
	if err != nil {
		return fmt.Errorf("digesting %s: %w", fs.Arg(0), err)
	}
	_, err = fmt.Fprintln(stdout, d)
	return err
}
