package send_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/send"
)

// LoadTrustedApprovers speaks for itself: its errors carry one package
// prefix, send's, with the path and the cause (the OS error of a file that
// cannot be read, the reason a malformed one is refused).
func TestLoadTrustedApproversErrorsAreSendsOwn(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	malformed := filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"approvers": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		is   error
		says string
	}{
		{missing, fs.ErrNotExist, "no such file"},
		{malformed, send.ErrInvalid, "names no approvers"},
	} {
		_, err := send.LoadTrustedApprovers(c.path)
		if err == nil {
			t.Fatalf("%s: loaded", c.path)
		}
		msg := err.Error()
		if !errors.Is(err, c.is) || !strings.HasPrefix(msg, "send: ") ||
			strings.Contains(msg[len("send: "):], "send: ") || strings.Contains(msg, "sign: ") ||
			!strings.Contains(msg, c.path) || !strings.Contains(msg, c.says) {
			t.Errorf("loading %s: %q; want it to match %v, start with the one prefix \"send: \", name the path and say %q", c.path, msg, c.is, c.says)
		}
	}
}
