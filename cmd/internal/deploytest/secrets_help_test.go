package deploytest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
)

// secretEnv are the environment variables that may carry a secret, each set
// to a value that must appear nowhere in what the commands print.
var secretEnv = map[string]string{
	"NATS_PASSWORD": "pw-8c1e5a1f0b2d",
	"NATS_URL":      "nats://someone:urlpw-4f7a90d2c3b1@127.0.0.1:1",
	"NATS_TOKEN":    "token-61b0f3e9a7c4",
	"NATS_NKEY":     "/nkey-path-2d9e41c07f35",
	"NATS_CREDS":    "/creds-path-9a3c5e7b1d02",
	"NATS_USER":     "user-5b2e8d4f6a13",
	"NATS_CERT":     "/cert-path-7e1c3a5b9d20",
	"NATS_KEY":      "/key-path-3f8b6d2e0c41",
	"NATS_CA":       "/ca-path-0d4a7c9e2b63",
}

// secretOf is the part of an environment value that must not be printed.
func secretOf(name, value string) string {
	if name == "NATS_URL" {
		return "urlpw-4f7a90d2c3b1"
	}
	return value
}

func TestTheBuiltCommands(t *testing.T) {
	bin := builtCommands(t)
	t.Run("help and usage errors print no secret from the environment", func(t *testing.T) {
		helpAndUsageErrorsPrintNoSecret(t, bin)
	})
	t.Run("every command prints its version and exits 0", func(t *testing.T) {
		for _, command := range []string{"executor", "publisher", "provider", "bench"} {
			out, err := exec.Command(filepath.Join(bin, command), "--version").CombinedOutput()
			if want := command + " " + cli.Release + "\n"; err != nil || string(out) != want {
				t.Errorf("%s --version: %v, printed %q", command, err, out)
			}
		}
	})
	t.Run("the production programs have no test-only or merged-away command or flag", func(t *testing.T) {
		for _, args := range [][]string{
			{"provider", "fault", "--drop-replies", "1"},
			{"provider", "serve", "--data", t.TempDir(), "--allow-faults"},
			{"provider", "stats"},
			{"executor", "send", "--envelope", "x.json"},
		} {
			out, err := exec.Command(filepath.Join(bin, args[0]), args[1:]...).CombinedOutput()
			if exitErr, ok := errors.AsType[*exec.ExitError](err); !ok || exitErr.ExitCode() != 2 {
				t.Errorf("%s: %v, want a usage error (exit 2)\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
	t.Run("executor serve --embedded on a busy address says at once that it is in use", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cmd := exec.Command(filepath.Join(bin, "executor"), "serve", "--embedded", "--data", t.TempDir(),
			"--listen", l.Addr().String(), "--insecure-allow-unsigned")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("it started: %s", out)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("it took %v to fail", took)
		}
		if !strings.Contains(string(out), "address in use: "+l.Addr().String()) {
			t.Errorf("it printed %s", out)
		}
	})
}

func helpAndUsageErrorsPrintNoSecret(t *testing.T, bin string) {
	subcommands := map[string][]string{
		"executor":  {"serve", "status", "verify", "redrive", "provision", "probe", "demo"},
		"publisher": {"digest", "approve", "check", "send", "request", "keygen", "trust", "console"},
		"provider":  {"serve", "records", "delete"},
		"bench":     {"backlog", "live"},
	}
	env := os.Environ()
	for k, v := range secretEnv {
		env = append(env, k+"="+v)
	}
	for command, subs := range subcommands {
		runs := [][]string{{"--help"}, {"--bogus"}, {"no-such-command"}}
		if command != "bench" { // bench without arguments measures: no usage to print
			runs = append(runs, []string{})
		}
		for _, sub := range subs {
			words := strings.Fields(sub)
			runs = append(runs,
				append(append([]string{}, words...), "--help"),
				append(append([]string{}, words...), "--bogus-flag"),
				append(append([]string{}, words...), "-h"),
			)
		}
		for _, args := range runs {
			cmd := exec.Command(filepath.Join(bin, command), args...)
			cmd.Env = env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			_ = cmd.Run() // usage errors exit non-zero; what matters is the output
			if out.Len() == 0 {
				t.Errorf("%s %s printed nothing; the check would prove nothing", command, strings.Join(args, " "))
			}
			for name, value := range secretEnv {
				if strings.Contains(out.String(), secretOf(name, value)) {
					t.Errorf("%s %s prints $%s:\n%s", command, strings.Join(args, " "), name, out.String())
				}
			}
		}
	}
}
