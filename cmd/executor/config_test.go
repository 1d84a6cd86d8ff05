package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// writeTrusted writes a trusted-approvers file of one reviewer into dir.
func writeTrusted(t *testing.T, dir string) string {
	t.Helper()
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "trusted-approvers.json")
	if err := sign.WriteTrusted(path, sign.ApproverFor("reviewer", k.Public())); err != nil {
		t.Fatal(err)
	}
	return path
}

// The example shipped in deploy/ passes serve's --check-config, its
// trusted approvers given on the command line in place of the file's path
// (the command line wins over the file).
func TestTheExampleConfigurationFilePassesCheckConfig(t *testing.T) {
	trusted := writeTrusted(t, t.TempDir())
	args := []string{"serve", "--config", filepath.Join("..", "..", "deploy", "serve.conf.example"), "--check-config", "--trusted-approvers", trusted}
	if err := run(context.Background(), args, io.Discard, io.Discard); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
}

func TestServeWithAConfigurationFile(t *testing.T) {
	dir := t.TempDir()
	trusted := writeTrusted(t, dir)
	data := filepath.Join(dir, "data")
	serveWith := func(t *testing.T, content string, args ...string) (string, error) {
		path := filepath.Join(t.TempDir(), "serve.conf")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return path, run(ctx, append([]string{"serve", "--config", path}, args...), io.Discard, io.Discard)
	}
	t.Run("the file's flags are checked by --check-config", func(t *testing.T) {
		if _, err := serveWith(t, "trusted-approvers = "+trusted+"\nserver = nats://a:4222,nats://b:4222\nreplicas = 3\n", "--check-config"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a flag on the command line wins over the file's", func(t *testing.T) {
		if _, err := serveWith(t, "trusted-approvers = "+trusted+"\nconcurrency = 0\n", "--check-config", "--concurrency", "4"); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct {
		name, content, says string
	}{
		{"an unknown key is refused, as a secret's would be", "insecure-allow-unsigned = true\ncaldav-password = hunter2\n", ":2: caldav-password: unknown key"},
		{"the NATS password is refused", "insecure-allow-unsigned = true\npassword = hunter2\n", ":2: password: a secret stays out of the configuration file"},
		{"a flag given twice is refused", "concurrency = 4\nconcurrency = 8\n", ":2: concurrency: given twice (first on line 1)"},
		{"a bad value is refused", "concurrency = many\n", `:1: concurrency: the value "many" is refused`},
		{"another configuration file is refused", "config = /etc/other.conf\n", ":1: config: a configuration file cannot name another"},
		{"a value serve refuses is refused as from the command line", "insecure-allow-unsigned = true\nconcurrency = 0\n", "--concurrency 0"},
		{"a server in the file is refused with --embedded", "insecure-allow-unsigned = true\nserver = nats://a:4222\n", "--embedded with --server"},
	} {
		t.Run(c.name+", with --check-config too, and nothing starts", func(t *testing.T) {
			for _, checkOnly := range []bool{false, true} {
				args := []string{"--embedded", "--data", data, "--listen", "127.0.0.1:0"}
				if checkOnly {
					args = append(args, "--check-config")
				}
				path, err := serveWith(t, c.content, args...)
				if !errors.Is(err, errUsage) || exitCode(err) != 2 || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("%v (exit %d), want a usage error saying %q", err, exitCode(err), c.says)
				}
				if strings.HasPrefix(c.says, ":") && !strings.Contains(err.Error(), path+c.says) {
					t.Errorf("%v does not name the file %s and its line", err, path)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error shows the secret: %v", err)
				}
				if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the refused command made its data directory: %v", err)
				}
			}
		})
	}
}

func TestProvisionRefusesTenantsItCannotBoundAndGivesEachOtherAnIntake(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenants", "Tenant-A"}, `not a caller scope`},
		{[]string{"--tenants", "a,,b"}, `tenant "": not a caller scope`},
		{[]string{"--tenants", "a,a"}, `named twice`},
		{[]string{"--tenants", "a", "--tenant-max-bytes", "1000"}, "holds not even one approval"},
		{[]string{"--tenants", "a,b,c", "--max-bytes", "1048576", "--tenant-max-bytes", "262144"}, "more than half of the 1048576"},
	} {
		err := run(context.Background(), append([]string{"provision"}, tc.args...), io.Discard, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--tenants") {
			t.Errorf("provision %s: %v, want a usage error naming --tenants and saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	env := testenv.Start(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"provision", "--server", env.URL(), "--tenants", "tenant-a,tenant-b",
		"--tenant-max-bytes", "1048576"}, &out, io.Discard); err != nil {
		t.Fatalf("provision: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, scope := range []string{"tenant-a", "tenant-b"} {
		if want := "tenant " + scope + ": intake stream INTAKE_" + scope + " ready, holding at most 1048576 bytes"; !strings.Contains(out.String(), want) {
			t.Errorf("provision printed %q, want %q", out.String(), want)
		}
		s, err := env.JS.Stream(ctx, topology.IntakeStream(scope))
		if err != nil || s.CachedInfo().Config.MaxBytes != 1<<20 {
			t.Errorf("after provision, %s: %v; want it bounded to 1048576 bytes", topology.IntakeStream(scope), err)
		}
	}
}
