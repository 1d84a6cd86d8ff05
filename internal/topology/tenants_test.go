package topology_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func TestTenantsThatAreNoScopeOrDoNotFitInApprovalsAreRefusedWithTheirReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    topology.Config
		want string
	}{
		{"a tenant that is no caller scope", topology.Config{Tenants: []string{"Tenant-A"}}, `tenant "Tenant-A": not a caller scope`},
		{"a tenant that would be two subject tokens", topology.Config{Tenants: []string{"tenant.a"}}, `tenant "tenant.a": not a caller scope`},
		{"a tenant named twice", topology.Config{Tenants: []string{"a", "b", "a"}}, `tenant "a" named twice`},
		{"a bound that holds no approval of the largest size", topology.Config{Tenants: []string{"a"}, TenantMaxBytes: 1000}, "holds not even one approval"},
		{"bounds that take more than half of APPROVALS", topology.Config{Tenants: []string{"a", "b", "c"}, MaxBytes: 1 << 20, TenantMaxBytes: 256 << 10},
			"3 tenants of 262144 bytes each hold 786432 bytes, more than half of the 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := topology.CheckTenants(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckTenants: %v, want an error saying %q", err, tc.want)
			}
			js := testenv.JetStream(t)
			if _, err := topology.Ensure(shortContext(t), js, tc.c); err == nil {
				t.Fatal("Ensure provisioned them")
			}
			if _, err := js.Stream(shortContext(t), topology.ApprovalsStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("after the refusal, APPROVALS: %v; want none made", err)
			}
		})
	}
	for _, ok := range []topology.Config{
		{},
		{Tenants: []string{"a", "b"}, MaxBytes: 1 << 20, TenantMaxBytes: 256 << 10},
		{Tenants: []string{"a", "b", "c"}, MaxBytes: -1},
	} {
		if err := topology.CheckTenants(ok); err != nil {
			t.Errorf("CheckTenants(%+v): %v", ok, err)
		}
	}
}

// The longest scope and the longest plain intent id make the longest
// source header: an approval of the largest size an intake takes still
// fits in APPROVALS, which would otherwise refuse it and stop the
// tenant's source. Past its bound, the intake refuses the tenant's next
// approval, and APPROVALS holds no more of the tenant than its bound.
func TestATenantsIntakeHoldsItsBoundAndEveryApprovalItTakesReachesApprovals(t *testing.T) {
	js := testenv.JetStream(t)
	ctx := shortContext(t)
	scope := strings.Repeat("s", 64)
	bound := int64(3 * topology.IntakeMaxMsg)
	if _, err := topology.Ensure(ctx, js, topology.Config{Tenants: []string{scope}, TenantMaxBytes: bound}); err != nil {
		t.Fatal(err)
	}
	publish := func(i, size int) error {
		m := nats.NewMsg("intake." + scope + "." + strings.Repeat("i", 127) + string(rune('a'+i)))
		m.Data = make([]byte, size)
		_, err := js.PublishMsg(ctx, m)
		return err
	}
	if err := publish(0, topology.IntakeMaxMsg+1); err == nil || !strings.Contains(err.Error(), "message size exceeds maximum") {
		t.Errorf("a message one byte over the intake's bound: %v, want refused as too large", err)
	}
	stored := 0
	var refused error
	for i := 0; refused == nil && i < 10; i++ {
		if refused = publish(i, topology.IntakeMaxMsg); refused == nil {
			stored++
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum bytes exceeded") || int64(stored*topology.IntakeMaxMsg) > bound {
		t.Fatalf("the intake stored %d approvals of %d bytes, then %v; want it refused past %d bytes", stored, topology.IntakeMaxMsg, refused, bound)
	}
	approvals, err := js.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for approvals.CachedInfo().State.Msgs != uint64(stored) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if _, err := approvals.Info(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := approvals.CachedInfo().State; got.Msgs != uint64(stored) || got.Bytes > uint64(bound)+uint64(stored)<<10 {
		t.Fatalf("APPROVALS holds %d messages, %d bytes; want the intake's %d, its bound %d and their source headers", got.Msgs, got.Bytes, stored, bound)
	}
	m, err := approvals.GetLastMsgForSubject(ctx, "approvals."+scope+".>")
	if err != nil {
		t.Fatal(err)
	}
	if from, _, ok := topology.SourcedFrom(m.Header.Get(topology.HeaderStreamSource)); !ok || from != topology.IntakeStream(scope) {
		t.Errorf("the sourced approval on %s names its source %q, want %s", m.Subject, m.Header.Get(topology.HeaderStreamSource), topology.IntakeStream(scope))
	}
}

// An executor that provisions names no tenants: it keeps those that
// executor provision --tenants set up, so that no tenant's approvals stop
// reaching APPROVALS.
func TestProvisioningWithoutTenantsKeepsTheTenantsProvisioned(t *testing.T) {
	js := testenv.JetStream(t)
	ctx := shortContext(t)
	if _, err := topology.Ensure(ctx, js, topology.Config{Tenants: []string{"tenant-a", "tenant-b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, src := range s.CachedInfo().Config.Sources {
		got = append(got, src.Name)
	}
	if strings.Join(got, " ") != "INTAKE_tenant-a INTAKE_tenant-b" {
		t.Errorf("APPROVALS sources %v, want both tenants' intakes kept", got)
	}
	p, err := topology.ReadRecord(ctx, js)
	if err != nil || len(p.Streams[topology.ApprovalsStream].Sources) != 2 {
		t.Errorf("the record of APPROVALS: %+v, %v; want its two sources", p.Streams[topology.ApprovalsStream].Sources, err)
	}
}
