package main

import (
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/sendtwice/sendtwice/bench/internal/bench"
	"github.com/sendtwice/sendtwice/internal/cli"
)

const abHelp = `Usage: bench ab [--pairs N] [--approvals N] [--unsigned] A_DIR B_DIR

Compares two builds on this machine: each of A_DIR and B_DIR holds a bench and a provider
executable built from one version (go build -o A_DIR/ ./bench/cmd/bench ./cmd/provider).
Each drains a fresh backlog in turn (bench backlog --embedded --no-references --executors 1),
--pairs times, the order alternating from pair to pair (A then B, then B then A, ...), so that
neither always runs after the other. Prints a line per drain as it ends, then each build's
medians and ranges (drain time, approvals/s, CPU per approval and the service's share of it),
B's ratio to A and in how many pairs B was lower. Figures from one machine and one run only:
state them as ratios.

`

// runAB is the ab command: two build directories and its flags.
func runAB(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench ab", abHelp, stderr)
	pairs := fs.Int("pairs", 5, "drain pairs `N`, at least 1")
	approvals := fs.Int("approvals", 20000, "approvals in each backlog `N`")
	unsigned := fs.Bool("unsigned", false, "send unsigned approvals")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		for _, arg := range fs.Args() {
			if strings.HasPrefix(arg, "-") {
				return usageErr(fs, "%s after the build directories: flags go before A_DIR and B_DIR", arg)
			}
		}
		return usageErr(fs, "want two build directories, A_DIR and B_DIR; got %d arguments", fs.NArg())
	}
	if *pairs < 1 {
		return usageErr(fs, "--pairs %d: want at least 1", *pairs)
	}
	if *approvals < 1 {
		return usageErr(fs, "--approvals %d: want at least 1", *approvals)
	}
	extra := []string{"--approvals", strconv.Itoa(*approvals)}
	if *unsigned {
		extra = append(extra, "--unsigned")
	}
	o := bench.ABOptions{A: fs.Arg(0), B: fs.Arg(1), Pairs: *pairs, Args: extra, Status: stderr}
	return bench.RunAB(ctx, o, stdout)
}
