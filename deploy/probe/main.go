// Command probe is the container health check of the sendtwice images,
// which have no shell and no HTTP client of their own:
//
//	probe http://127.0.0.1:9090/readyz
//
// It exits 0 when the URL answers 200 within the timeout, 1 otherwise,
// printing the answer's first line.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("probe", "Usage: probe [--timeout D] URL\n\nExits 0 when URL answers 200, else 1.\n\n", stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	c := http.Client{Timeout: *timeout}
	resp, err := c.Get(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "probe:", err)
		return 1
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "probe: %s: %s %s\n", fs.Arg(0), resp.Status, line)
		return 1
	}
	fmt.Fprint(stdout, line)
	return 0
}
