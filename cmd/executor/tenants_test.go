package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

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
