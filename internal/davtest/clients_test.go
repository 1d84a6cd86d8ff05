package davtest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records a skip or a failure instead of
// ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestAMissingClientSkipsLocallyAndFailsUnderCI(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "todoman")
	for _, tc := range []struct {
		name, ci           string
		wantSkip, wantFail bool
	}{
		{"without CI the test is skipped, naming the package", "", true, false},
		{"under CI=true the test fails, naming the package", "true", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			requireCommands(r, "/bin/sh", missing)
			msg := r.skipped + r.failed
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			if !strings.Contains(msg, missing) || !strings.Contains(msg, "todoman") {
				t.Errorf("the message %q does not name %s and its package", msg, missing)
			}
		})
	}
	t.Run("with every command present nothing happens", func(t *testing.T) {
		t.Setenv("CI", "true")
		r := &recorder{TB: t}
		requireCommands(r, "/bin/sh")
		if r.skipped != "" || r.failed != "" {
			t.Errorf("skipped %q, failed %q; want neither", r.skipped, r.failed)
		}
	})
}
