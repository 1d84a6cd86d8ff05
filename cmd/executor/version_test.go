package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestVersionPrintsTheModuleVersionAndExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--version"}, &out, &errb)
	if code := exitCode(err); code != 0 {
		t.Fatalf("exit %d (%v): %s", code, err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "executor ") || len(strings.TrimSpace(out.String())) <= len("executor") {
		t.Fatalf("printed %q", out.String())
	}
}
