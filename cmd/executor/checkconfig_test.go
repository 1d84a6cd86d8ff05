package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendtwice/sendtwice/internal/sign"
)

func TestServeCheckConfig(t *testing.T) {
	dir := t.TempDir()
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string][]sign.Approver{"approvers": {sign.ApproverFor("reviewer", k.Public())}})
	if err != nil {
		t.Fatal(err)
	}
	trusted := filepath.Join(dir, "trusted-approvers.json")
	notTrusted := filepath.Join(dir, "not-trusted.json")
	for p, b := range map[string][]byte{trusted: b, notTrusted: []byte("-----BEGIN PUBLIC KEY-----\n")} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	serve := func(args ...string) error {
		return run(context.Background(), append([]string{"serve", "--check-config"}, args...), io.Discard, io.Discard)
	}

	for _, args := range [][]string{
		{"--trusted-approvers", trusted, "--server", "nats://a:4222,nats://b:4222", "--replicas", "3", "--http", "0.0.0.0:9090"},
		{"--insecure-allow-unsigned", "--embedded", "--data", data, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"},
	} {
		if err := serve(args...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--check-config made the data directory: %v", err)
	}

	for _, tc := range []struct {
		args  []string
		usage bool
	}{
		{[]string{}, true}, // neither --trusted-approvers nor --insecure-allow-unsigned
		{[]string{"--trusted-approvers", filepath.Join(dir, "missing.json")}, false},
		{[]string{"--trusted-approvers", notTrusted}, false},
		{[]string{"--trusted-approvers", trusted, "--replicas", "7"}, true},
		{[]string{"--trusted-approvers", trusted, "--http", "9090"}, true},
		{[]string{"--trusted-approvers", trusted, "--tls-ca", filepath.Join(dir, "missing.pem")}, true},
		{[]string{"--trusted-approvers", trusted, "--creds", filepath.Join(dir, "missing.creds")}, true},
		{[]string{"--trusted-approvers", trusted, "--tls-cert", filepath.Join(dir, "c.pem")}, true},
	} {
		err := serve(tc.args...)
		if err == nil {
			t.Errorf("%q: passed", tc.args)
			continue
		}
		if errors.Is(err, errUsage) != tc.usage {
			t.Errorf("%q: %v, usage error %v, want %v", tc.args, err, errors.Is(err, errUsage), tc.usage)
		}
	}
}
