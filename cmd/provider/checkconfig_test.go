package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestServeCheckConfig(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	serve := func(args ...string) error {
		c := newApp(io.Discard, io.Discard, func(string) string { return "" })
		return c.run(context.Background(), append([]string{"serve", "--check-config"}, args...))
	}
	if err := serve("--data", data, "--lease-replicas", "3", "--server", "nats://a:4222,nats://b:4222", "--http", "0.0.0.0:9090"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--check-config opened the database: %v", err)
	}
	for _, args := range [][]string{
		{},
		{"--data", data, "--lease-replicas", "0"},
		{"--data", data, "--lease-replicas", "6"},
		{"--data", data, "--http", "9090"},
		{"--data", data, "--creds", filepath.Join(dir, "missing.creds")},
		{"--data", data, "--tls-ca", filepath.Join(dir, "missing.pem")},
		{"--data", data, "--password", "p"},
	} {
		if err := serve(args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
