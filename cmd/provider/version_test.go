package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestVersionPrintsTheModuleVersionAndSucceeds(t *testing.T) {
	var out, errb bytes.Buffer
	if err := newApp(&out, &errb, func(string) string { return "" }).run(context.Background(), []string{"--version"}); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "provider ") || len(strings.TrimSpace(out.String())) <= len("provider") {
		t.Fatalf("printed %q", out.String())
	}
}
