package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDigestRefusesANumberJCSWouldRoundAsTheExecutorsDo(t *testing.T) {
	dir := t.TempDir()
	digest := func(doc string) (string, string, int) {
		path := filepath.Join(dir, "doc.json")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), []string{"digest", path}, strings.NewReader(""), &out, &errb), &errb)
		return out.String(), errb.String(), code
	}
	for _, doc := range []string{`{"n":9007199254740993}`, `{"n":9007199254740992.4}`} {
		out, errs, code := digest(doc)
		if code != exitFailure || !strings.Contains(errs, "not exactly a double") {
			t.Errorf("%s: exit %d, printed %q, error %q; want it refused as not exactly a double", doc, code, out, errs)
		}
	}
	if out, errs, code := digest(`{"n":9007199254740992.0}`); code != 0 || !strings.HasPrefix(out, "sha256:") {
		t.Errorf("2^53 written as 9007199254740992.0: exit %d, %q, %q", code, out, errs)
	}
}
