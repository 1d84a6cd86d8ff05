package publish

import (
	"flag"
	"fmt"
	"io"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/cli"
)

// DigestHelp is digest's usage.
const DigestHelp = "digest [--canonical] FILE|-\n\nPrints the canonical digest (sha256: + hex of SHA-256 over RFC 8785 JSON) of a JSON document,\nor with --canonical its canonical bytes. - reads standard input. A number that JCS would round\n(more digits than a double holds, such as 9007199254740993) is refused, as the executors refuse it."

// DigestConfig is digest's flags, as given.
type DigestConfig struct {
	fs        *flag.FlagSet
	canonical *bool
}

// DigestFlagsVar defines digest's flags on fs.
func DigestFlagsVar(fs *flag.FlagSet) *DigestConfig {
	canonical := fs.Bool("canonical", false, "print the canonical JSON bytes instead of the digest")
	return &DigestConfig{fs: fs, canonical: canonical}
}

// Digest runs digest with its parsed flags.
func Digest(cf *DigestConfig, stdin io.Reader, stdout io.Writer) error {
	if cf.fs.NArg() != 1 {
		return cli.UsageError(cf.fs, "digest takes exactly one FILE (or - for standard input)")
	}
	data, err := readInput(cf.fs.Arg(0), stdin)
	if err != nil {
		return fmt.Errorf("reading %s: %w", cf.fs.Arg(0), err)
	}
	if *cf.canonical {
		out, err := canon.CanonicalizeExact(data)
		if err != nil {
			return fmt.Errorf("canonicalising %s: %w", cf.fs.Arg(0), err)
		}
		_, err = stdout.Write(out)
		return err
	}
	d, err := canon.DigestExact(data)
	if err != nil {
		return fmt.Errorf("digesting %s: %w", cf.fs.Arg(0), err)
	}
	_, err = fmt.Fprintln(stdout, d)
	return err
}
