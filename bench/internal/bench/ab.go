package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ABOptions configure an A/B comparison of two builds.
type ABOptions struct {
	// A and B are directories that each hold a bench and a provider
	// executable, built from the two versions compared.
	A, B string
	// Pairs is the number of drain pairs; the order within a pair
	// alternates (A then B, B then A, …), so that neither build always runs
	// on the machine the other one just warmed or loaded.
	Pairs int
	// Args are the flags each drain gets after "backlog --embedded
	// --no-references --executors 1 --provider-bin DIR/provider".
	Args []string
	// Status, when set, gets a line per drain as it ends.
	Status io.Writer
}

// ErrAB is the cause of every failed A/B comparison.
var ErrAB = errors.New("bench ab")

// abDrain is one drain's figures, read from its report.
type abDrain struct {
	took         time.Duration
	cpu, service float64 // µs per approval; service is 0 when not reported
	perSecond    float64
}

// RunAB drains a fresh backlog with each build in turn, o.Pairs times,
// and writes each build's medians and ranges and B's ratio to A to w.
func RunAB(ctx context.Context, o ABOptions, w io.Writer) error {
	if o.Pairs < 1 {
		return fmt.Errorf("%w: --pairs %d: want at least 1", ErrAB, o.Pairs)
	}
	for _, dir := range []string{o.A, o.B} {
		if err := checkBuild(dir); err != nil {
			return err
		}
	}
	var runs [2][]abDrain
	for i := range o.Pairs {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, k := range order {
			dir := []string{o.A, o.B}[k]
			d, err := abRun(ctx, dir, o.Args)
			if err != nil {
				return err
			}
			runs[k] = append(runs[k], d)
			if o.Status != nil {
				fmt.Fprintf(o.Status, "pair %d, %s: drain %s, %s/s, %s\n", i+1, "AB"[k:k+1], d.took.Round(time.Millisecond), thousands(d.perSecond), abCPU(d.cpu, d.service))
			}
		}
	}
	writeAB(w, o, runs)
	return nil
}

// checkBuild refuses a directory without a bench and a provider executable.
func checkBuild(dir string) error {
	for _, name := range []string{"bench", "provider"} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%w: %s: want a directory holding bench and provider (go build -o DIR/ ./bench/cmd/bench ./cmd/provider): %w", ErrAB, dir, err)
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%w: %s is not an executable file", ErrAB, p)
		}
	}
	return nil
}

// abRun drains one backlog with the build in dir and reads its figures.
func abRun(ctx context.Context, dir string, extra []string) (abDrain, error) {
	args := append([]string{"backlog", "--embedded", "--no-references", "--executors", "1",
		"--provider-bin", filepath.Join(dir, "provider")}, extra...)
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "bench"), args...)
	// Interrupted, the drain's bench stops its own service process and
	// removes its data; killed, it could do neither.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return abDrain{}, fmt.Errorf("%w: interrupted while %s drained: %w", ErrAB, dir, ctx.Err())
		}
		return abDrain{}, fmt.Errorf("%w: running %s %s: %w\n%s", ErrAB, cmd.Path, strings.Join(args, " "), err, lastLines(errOut.String(), 20))
	}
	d, err := parseDrainRow(out.String())
	if err != nil {
		return abDrain{}, fmt.Errorf("%w: the report of %s: %w", ErrAB, cmd.Path, err)
	}
	return d, nil
}

// drainRow matches a row of the report's drain table: stored intents,
// executors, approvals, envelope, drain, approvals/s, then the ratios, then
// the CPU per approval with, when the service runs in its own process, its
// share.
var drainRow = regexp.MustCompile(`(?m)^\s+\d+\s+\d+\s+\d+\s+\d+ B\s+(\S+)\s+([\d,]+)\s.*?(\d+) µs(?: \(service (\d+) µs\))?`)

// parseDrainRow reads the first drain row of a backlog report.
func parseDrainRow(report string) (abDrain, error) {
	m := drainRow.FindStringSubmatch(report)
	if m == nil {
		return abDrain{}, errors.New("no drain row with a CPU figure")
	}
	var d abDrain
	var err error
	if d.took, err = time.ParseDuration(m[1]); err != nil {
		return abDrain{}, fmt.Errorf("drain time %q: %w", m[1], err)
	}
	d.perSecond, _ = strconv.ParseFloat(strings.ReplaceAll(m[2], ",", ""), 64)
	d.cpu, _ = strconv.ParseFloat(m[3], 64)
	if m[4] != "" {
		d.service, _ = strconv.ParseFloat(m[4], 64)
	}
	return d, nil
}

// writeAB prints each build's medians and ranges, and B against A.
func writeAB(w io.Writer, o ABOptions, runs [2][]abDrain) {
	fmt.Fprintf(w, "A: %s\nB: %s\n%d alternating pairs of: bench backlog --embedded --no-references --executors 1 %s\n\n",
		o.A, o.B, o.Pairs, strings.Join(o.Args, " "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tdrain, s\tapprovals/s\tCPU/approval, µs\tof it the service, µs")
	figures := []struct {
		of     func(abDrain) float64
		format func(float64) string
	}{
		{func(d abDrain) float64 { return d.took.Seconds() }, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }},
		{func(d abDrain) float64 { return d.perSecond }, thousands},
		{func(d abDrain) float64 { return d.cpu }, thousands},
		{func(d abDrain) float64 { return d.service }, thousands},
	}
	var medians [2][]float64
	for k, name := range []string{"A", "B"} {
		fmt.Fprintf(tw, "%s median (runs)", name)
		for _, f := range figures {
			med, lo, hi := spread(runs[k], f.of)
			medians[k] = append(medians[k], med)
			fmt.Fprintf(tw, "\t%s (%s–%s)", f.format(med), f.format(lo), f.format(hi))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "B/A of the medians")
	for i := range figures {
		fmt.Fprintf(tw, "\t%s", abRatio(medians[1][i], medians[0][i]))
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "pairs where B is lower")
	for _, f := range figures {
		lower := 0
		for i := range runs[0] {
			if f.of(runs[1][i]) < f.of(runs[0][i]) {
				lower++
			}
		}
		fmt.Fprintf(tw, "\t%d of %d", lower, len(runs[0]))
	}
	fmt.Fprintln(tw)
	tw.Flush()
}

// spread is the median, the least and the most of f over runs.
func spread(runs []abDrain, f func(abDrain) float64) (median, lo, hi float64) {
	v := make([]float64, len(runs))
	for i, d := range runs {
		v[i] = f(d)
	}
	slices.Sort(v)
	n := len(v)
	median = v[n/2]
	if n%2 == 0 {
		median = (v[n/2-1] + v[n/2]) / 2
	}
	return median, v[0], v[n-1]
}

// abRatio is the report's ratio of b to a, marked as one.
func abRatio(b, a float64) string {
	if r := ratio(b, a); r != "-" {
		return r + "×"
	}
	return "-"
}

func abCPU(cpu, service float64) string {
	if service == 0 {
		return fmt.Sprintf("%.0f µs", cpu)
	}
	return fmt.Sprintf("%.0f µs (service %.0f µs)", cpu, service)
}

// lastLines is the end of s, at most n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
