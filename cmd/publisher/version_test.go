package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestVersionPrintsTheModuleVersionAndExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--version"}, strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != 0 {
		t.Fatalf("exit %d (%v): %s", code, err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "publisher ") || len(strings.TrimSpace(out.String())) <= len("publisher") {
		t.Fatalf("printed %q", out.String())
	}
}
