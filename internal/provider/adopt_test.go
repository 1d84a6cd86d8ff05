package provider

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// adoptionKV opens the adoption bucket on the server at url, creating it
// (without a TTL, as Serve does) if it does not exist.
func adoptionKV(t *testing.T, url string) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := openAdoptionBucket(ctxT(t), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// adopted reads the adoption record on the server at url.
func adopted(t *testing.T, url string) (Adoption, uint64) {
	t.Helper()
	a, rev, found, err := readAdoption(ctxT(t), adoptionKV(t, url))
	if err != nil || !found {
		t.Fatalf("adoption record: found %v, %v", found, err)
	}
	return a, rev
}

// awaitLeaseGone waits until the lease key is gone: its TTL has passed
// since its holder's last renewal.
func awaitLeaseGone(t *testing.T, url string) {
	t.Helper()
	kv := leaseKV(t, url, time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := kv.Get(ctxT(t), LeaseKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the lease did not expire: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createRetrying sends req until the service gives an answer that is not a
// transient error.
func createRetrying(t *testing.T, client *Client, req CreateRequest) CreateResponse {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Create(ctxT(t), req)
		if err == nil {
			return resp
		}
		if !IsTransient(err) || time.Now().After(deadline) {
			t.Fatalf("create %s: %v", req.IntentID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refusedAsNotAdopted checks that err refuses a store in favour of the
// adopted one, naming it, where and when it was adopted, and what to do.
func refusedAsNotAdopted(t *testing.T, err error, adoptedID, adoptedDir, refusedID string) {
	t.Helper()
	var ae *AdoptionError
	if !errors.Is(err, ErrNotAdopted) || !errors.As(err, &ae) {
		t.Fatalf("error %v, want an *AdoptionError", err)
	}
	host, _ := os.Hostname()
	msg := err.Error()
	for _, want := range []string{adoptedID, "on host " + host, "data directory " + adoptedDir, "adopted 20",
		refusedID, "--replace " + adoptedID, "provider adopt", "created again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if ae.Adopted.StoreID != adoptedID || ae.StoreID != refusedID {
		t.Errorf("refusal names adopted %s and refused %s; want %s and %s", ae.Adopted.StoreID, ae.StoreID, adoptedID, refusedID)
	}
}

func TestANewStoreIsRefusedAfterTheHolderDied(t *testing.T) {
	// The reproduction: kill -9 the service, wait past its lease, start
	// another store, send the same approval again.
	url := startNATS(t)
	dirA := t.TempDir()
	cmd, a := serveProcess(t, url, dirA, time.Second)
	client := NewClient(connect(t, url))
	req := newRequest("intent-0001", "the same approval")
	first := createRetrying(t, client, req)
	if first.Outcome != OutcomeCreated {
		t.Fatalf("first send: %+v", first)
	}
	kill(t, cmd)

	stB := openStore(t, t.TempDir(), Options{})
	t.Run("another store started while the killed holder's lease lives is refused", func(t *testing.T) {
		_, err := Serve(connect(t, url), stB, ServiceConfig{Logger: quietLogger()})
		refusedAsNotAdopted(t, err, a.StoreID, dirA, stB.ID())
	})
	awaitLeaseGone(t, url)
	t.Run("another store started after the lease ended is still refused, naming the adopted store", func(t *testing.T) {
		_, err := Serve(connect(t, url), stB, ServiceConfig{Logger: quietLogger(), DataDir: "/elsewhere"})
		refusedAsNotAdopted(t, err, a.StoreID, dirA, stB.ID())
		if !strings.Contains(err.Error(), "--data /elsewhere") {
			t.Errorf("refusal %q does not give the refused store's directory to adopt", err)
		}
		if got := stB.Stats(); got != (Counts{}) {
			t.Errorf("the refused store counted %+v", got)
		}
	})
	t.Run("the original store, back, replays the resend: no second created", func(t *testing.T) {
		stA := openStore(t, dirA, Options{})
		svc, err := Serve(connect(t, url), stA, ServiceConfig{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("the adopted store did not serve again: %v", err)
		}
		defer func() { _ = svc.Stop() }()
		again := createRetrying(t, client, req)
		if again.Outcome != OutcomeReplayed || again.TaskID != first.TaskID || again.StoreID != a.StoreID || again.Counts != counts(2, 1, 1) {
			t.Errorf("resend: %+v; want replayed %s by %s with 2, 1, 1", again, first.TaskID, a.StoreID)
		}
	})
}

func TestANewStoreIsRefusedWhileTheHolderIsStalled(t *testing.T) {
	// The reproduction: SIGSTOP the serving instance past its lease, start
	// another store, SIGCONT, send again the intents it had created.
	url := startNATS(t)
	dirA := t.TempDir()
	cmd, a := serveProcess(t, url, dirA, time.Second)
	client := NewClient(connect(t, url))
	client.Timeout = time.Second
	req := newRequest("intent-0001", "the same approval")
	first := createRetrying(t, client, req)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	awaitLeaseGone(t, url)

	stB := openStore(t, t.TempDir(), Options{})
	t.Run("another store started while the holder is stalled past its lease is refused", func(t *testing.T) {
		svc, err := Serve(connect(t, url), stB, ServiceConfig{Logger: quietLogger()})
		if err == nil {
			_ = svc.Stop()
		}
		refusedAsNotAdopted(t, err, a.StoreID, dirA, stB.ID())
	})
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Run("the holder, continued, serves on and replays the resend: no second created", func(t *testing.T) {
		again := createRetrying(t, client, req)
		if again.Outcome != OutcomeReplayed || again.TaskID != first.TaskID || again.StoreID != a.StoreID || again.Counts != counts(2, 1, 1) {
			t.Errorf("resend: %+v; want replayed %s by %s with 2, 1, 1", again, first.TaskID, a.StoreID)
		}
		if got := stB.Stats(); got != (Counts{}) {
			t.Errorf("the refused store counted %+v", got)
		}
	})
}

func TestADeploymentKeepsItsStore(t *testing.T) {
	t.Run("the first start adopts its store, says so, and records where and when", func(t *testing.T) {
		url := startNATS(t)
		log := &logBuffer{}
		dir := t.TempDir()
		st := openStore(t, dir, Options{})
		svc, err := Serve(connect(t, url), st, ServiceConfig{Logger: log.logger(), DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = svc.Stop() }()
		a, _ := adopted(t, url)
		host, _ := os.Hostname()
		if a.StoreID != st.ID() || a.Host != host || a.Path != dir || a.PID != os.Getpid() || a.How != AdoptedAtFirstStart || a.Replaces != "" {
			t.Errorf("record %+v", a)
		}
		if _, err := time.Parse(time.RFC3339, a.AdoptedAt); err != nil {
			t.Errorf("adopted_at %q: %v", a.AdoptedAt, err)
		}
		if out := log.String(); !strings.Contains(out, `level=WARN msg="store adopted at the deployment's first start`) || !strings.Contains(out, st.ID()) {
			t.Errorf("log:\n%s", out)
		}
	})
	t.Run("a restart on the same store serves and leaves the record as it was", func(t *testing.T) {
		url := startNATS(t)
		dir := t.TempDir()
		st := openStore(t, dir, Options{})
		svc, err := Serve(connect(t, url), st, ServiceConfig{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Stop(); err != nil {
			t.Fatal(err)
		}
		_, rev := adopted(t, url)
		svc, err = Serve(connect(t, url), st, ServiceConfig{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("restart on the same store: %v", err)
		}
		defer func() { _ = svc.Stop() }()
		if _, again := adopted(t, url); again != rev {
			t.Errorf("record revision %d after the restart, want %d: a restart rewrote it", again, rev)
		}
	})
	t.Run("a copy of the adopted store's data directory takes over after its holder was killed", func(t *testing.T) {
		url := startNATS(t)
		dir, replica := t.TempDir(), filepath.Join(t.TempDir(), "replica")
		st := openStore(t, dir, Options{})
		id := st.ID()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", dir, replica).CombinedOutput(); err != nil {
			t.Fatalf("copy: %v\n%s", err, out)
		}
		cmd, holder := serveProcess(t, url, dir, time.Minute)
		kill(t, cmd)
		copied := openStore(t, replica, Options{})
		if copied.ID() != id || holder.StoreID != id {
			t.Fatalf("ids %s, %s, want %s", copied.ID(), holder.StoreID, id)
		}
		svc, err := Serve(connect(t, url), copied, ServiceConfig{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("failover to the copy: %v", err)
		}
		defer func() { _ = svc.Stop() }()
		if resp := createRetrying(t, NewClient(connect(t, url)), newRequest("after-failover", "x")); resp.StoreID != id {
			t.Errorf("create answered by %s, want %s", resp.StoreID, id)
		}
	})
}

func TestAdopt(t *testing.T) {
	url := startNATS(t)
	dirA := t.TempDir()
	stA := openStore(t, dirA, Options{})
	svcA, err := Serve(connect(t, url), stA, ServiceConfig{Logger: quietLogger(), DataDir: dirA})
	if err != nil {
		t.Fatal(err)
	}
	stB := openStore(t, t.TempDir(), Options{})
	nc := connect(t, url)

	t.Run("it is refused while the adopted store's instance serves", func(t *testing.T) {
		_, err := Adopt(ctxT(t), nc, stB, AdoptConfig{Replaces: stA.ID(), Logger: quietLogger()})
		if !errors.Is(err, ErrAdoptRefused) || !strings.Contains(err.Error(), "answers a micro PING") || !strings.Contains(err.Error(), stA.ID()) {
			t.Errorf("error %v, want a refusal naming the serving instance", err)
		}
	})
	if err := svcA.Stop(); err != nil {
		t.Fatal(err)
	}
	_, rev := adopted(t, url)

	killed, _ := json.Marshal(LeaseHolder{StoreID: stA.ID(), Instance: "killed", Host: "elsewhere", PID: 7})
	refusals := []struct {
		name     string
		replaces string
		lease    []byte // a lease left by a killed instance, if any
		want     []string
	}{
		{"it is refused without naming the replaced store", "", nil, []string{"--replace", stA.ID(), dirA}},
		{"it is refused naming a store that is not the adopted one", "store-00000000000000ff", nil, []string{"store-00000000000000ff is not the adopted store", stA.ID()}},
		{"it is refused while a killed instance's lease lives", stA.ID(), killed, []string{"holds the lease", "killed", "adopt may be run again"}},
	}
	for _, tc := range refusals {
		t.Run(tc.name+", and changes nothing", func(t *testing.T) {
			if tc.lease != nil {
				kv := leaseKV(t, url, time.Minute)
				if _, err := kv.Put(ctxT(t), LeaseKey, tc.lease); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = kv.Delete(ctxT(t), LeaseKey) }()
			}
			_, err := Adopt(ctxT(t), nc, stB, AdoptConfig{Replaces: tc.replaces, Logger: quietLogger()})
			if !errors.Is(err, ErrAdoptRefused) {
				t.Fatalf("error %v, want ErrAdoptRefused", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
			if a, again := adopted(t, url); a.StoreID != stA.ID() || again != rev {
				t.Errorf("record %+v at revision %d, want %s unchanged at %d", a, again, stA.ID(), rev)
			}
		})
	}

	t.Run("naming the adopted store, it adopts the new one, which then serves, and the old one is refused", func(t *testing.T) {
		log := &logBuffer{}
		res, err := Adopt(ctxT(t), nc, stB, AdoptConfig{Replaces: stA.ID(), DataDir: "/data/b", Logger: log.logger()})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Changed || res.Replaced == nil || res.Replaced.StoreID != stA.ID() || res.Adopted.StoreID != stB.ID() {
			t.Errorf("result %+v", res)
		}
		a, _ := adopted(t, url)
		if a.StoreID != stB.ID() || a.How != AdoptedByOperator || a.Replaces != stA.ID() || a.Path != "/data/b" {
			t.Errorf("record %+v", a)
		}
		if !strings.Contains(log.String(), "level=WARN msg=\"STORE ADOPTED") {
			t.Errorf("log:\n%s", log.String())
		}
		svc, err := Serve(connect(t, url), stB, ServiceConfig{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("the adopted store: %v", err)
		}
		resp := createRetrying(t, NewClient(nc), newRequest("intent-b", "x"))
		if resp.StoreID != stB.ID() || resp.Outcome != OutcomeCreated {
			t.Errorf("create: %+v", resp)
		}
		if err := svc.Stop(); err != nil {
			t.Fatal(err)
		}
		_, err = Serve(connect(t, url), stA, ServiceConfig{Logger: quietLogger()})
		refusedAsNotAdopted(t, err, stB.ID(), "/data/b", stA.ID())
	})
	t.Run("adopting the adopted store again changes nothing", func(t *testing.T) {
		_, before := adopted(t, url)
		res, err := Adopt(ctxT(t), nc, stB, AdoptConfig{Replaces: stA.ID(), Logger: quietLogger()})
		if err != nil || res.Changed || res.Adopted.StoreID != stB.ID() {
			t.Errorf("result %+v, %v; want nothing changed", res, err)
		}
		if _, after := adopted(t, url); after != before {
			t.Errorf("revision %d, want %d", after, before)
		}
	})
	t.Run("naming a store on a deployment that adopted none is refused", func(t *testing.T) {
		_, err := Adopt(ctxT(t), connect(t, startNATS(t)), stB, AdoptConfig{Replaces: stA.ID(), Logger: quietLogger()})
		if !errors.Is(err, ErrAdoptRefused) || !strings.Contains(err.Error(), "no store is adopted") {
			t.Errorf("error %v", err)
		}
	})
}

func TestAServingInstanceHoldsToTheRecord(t *testing.T) {
	t.Run("an instance whose store the deployment replaced stops at once and releases the lease", func(t *testing.T) {
		log := &logBuffer{}
		h := newHarness(t, Options{}, ServiceConfig{LeaseTTL: time.Second, Logger: log.logger()})
		other := newAdoption("store-0000000000000bad", "/other", AdoptedByOperator, h.st.ID())
		val, _ := json.Marshal(other)
		if _, err := adoptionKV(t, h.url).Put(ctxT(t), AdoptionKey, val); err != nil {
			t.Fatal(err)
		}
		h.expectStoppedLoudly(t, log, 10*time.Second, ErrStoreReplaced, other.StoreID, "STORE REPLACED")
		if _, err := leaseKV(t, h.url, time.Second).Get(ctxT(t), LeaseKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("lease: %v, want it released for the adopted store", err)
		}
	})
	gone := []struct {
		name   string
		remove func(t *testing.T, url string)
	}{
		{"a record deleted while the store serves is written again", func(t *testing.T, url string) {
			if err := adoptionKV(t, url).Delete(ctxT(t), AdoptionKey); err != nil {
				t.Fatal(err)
			}
		}},
		{"a bucket deleted while the store serves is made again", func(t *testing.T, url string) {
			js, err := jetstream.New(connect(t, url))
			if err != nil {
				t.Fatal(err)
			}
			if err := js.DeleteKeyValue(ctxT(t), AdoptionBucket); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range gone {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{}, ServiceConfig{LeaseTTL: time.Second})
			tc.remove(t, h.url)
			deadline := time.Now().Add(10 * time.Second)
			for {
				js, err := jetstream.New(h.nc)
				if err != nil {
					t.Fatal(err)
				}
				if kv, err := js.KeyValue(ctxT(t), AdoptionBucket); err == nil {
					if a, _, found, err := readAdoption(ctxT(t), kv); err == nil && found {
						if a.StoreID != h.st.ID() || a.How != AdoptedAgain {
							t.Fatalf("record %+v, want %s recorded again", a, h.st.ID())
						}
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("the record was not written again")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if resp := createRetrying(t, h.client, newRequest("after", "x")); resp.StoreID != h.st.ID() {
				t.Errorf("create: %+v", resp)
			}
		})
	}
}

func TestTheAdoptionRecordMustBeOneThatLasts(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, js jetstream.JetStream)
		want    string
	}{
		{"a bucket with a TTL is refused, since the record in it would expire", func(t *testing.T, js jetstream.JetStream) {
			if _, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: AdoptionBucket, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}, "has a TTL"},
		{"a record that names no store is refused", func(t *testing.T, js jetstream.JetStream) {
			kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: AdoptionBucket})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctxT(t), AdoptionKey, []byte(`{"store_id":"anything"}`)); err != nil {
				t.Fatal(err)
			}
		}, "does not name a store"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := startNATS(t)
			js, err := jetstream.New(connect(t, url))
			if err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, js)
			st := openStore(t, t.TempDir(), Options{})
			_, err = Serve(connect(t, url), st, ServiceConfig{Logger: quietLogger()})
			if !errors.Is(err, errAdoptionBucket) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

func TestARoleWithoutTheRecordsPermissionsIsToldSo(t *testing.T) {
	// The service's permissions as they were before the record: the lease,
	// the ping, and nothing of the adoption bucket.
	ns := startServer(t, &server.Options{Port: -1, JetStream: true, StoreDir: t.TempDir(),
		Users: []*server.User{{Username: "service", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{"$JS.API.INFO", "$SRV.PING.fake-task-provider",
				"$JS.API.STREAM.INFO.KV_" + LeaseBucket, "$JS.API.STREAM.CREATE.KV_" + LeaseBucket,
				"$JS.API.DIRECT.GET.KV_" + LeaseBucket + ".>", "$KV." + LeaseBucket + "." + LeaseKey}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", "fake-task-provider.>", "$SRV.>"}},
		}}}})
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("service", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st := openStore(t, t.TempDir(), Options{})
	_, err = Serve(nc, st, ServiceConfig{Logger: quietLogger(), StartTimeout: 2 * time.Second})
	if !errors.Is(err, errAdoptionBucket) || !errors.Is(err, nats.ErrPermissionViolation) ||
		!strings.Contains(err.Error(), AdoptionBucket) || strings.Contains(err.Error(), "gave up") {
		t.Errorf("error %v; want a refusal at once naming the permissions violation and the bucket", err)
	}
}

// A new store that is meant (the demo's) says so at INFO with its reason,
// and warns of nothing.
func TestAMeantNewStoreIsLoggedCalmly(t *testing.T) {
	log := &logBuffer{}
	st, err := Open(t.TempDir(), Options{Logger: log.logger(), NewReason: "the demo starts every store empty"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out := log.String()
	if !strings.Contains(out, `level=INFO msg="new store, as meant: the demo starts every store empty"`) || strings.Contains(out, "level=WARN") {
		t.Errorf("log:\n%s", out)
	}
}

// A stopped instance releases the lease, so that a store adopted in its
// place starts at once; that adoption is an operator's alarm, unless a
// reason says it is meant.
func TestAStoreAdoptedInPlaceOfAStoppedOneStartsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, reason, want, never string
	}{
		{"without a reason it warns that every intent is created again", "",
			`level=WARN msg="STORE ADOPTED: this store replaces the one the deployment used; every intent`, "as meant"},
		{"with a reason it logs the reason at INFO", "the demo starts every store empty",
			`level=INFO msg="store adopted in place of the previous one, as meant: the demo starts every store empty"`, "STORE ADOPTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startNATS(t)
			first := openStore(t, t.TempDir(), Options{})
			svc, err := Serve(connect(t, url), first, ServiceConfig{Logger: quietLogger(), LeaseTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := svc.Stop(); err != nil {
				t.Fatal(err)
			}
			log := &logBuffer{}
			second := openStore(t, t.TempDir(), Options{})
			svc2, err := Serve(connect(t, url), second, ServiceConfig{Logger: log.logger(), Replaces: first.ID(), ReplaceReason: tc.reason})
			if err != nil {
				t.Fatalf("after a graceful stop: %v", err)
			}
			_ = svc2.Stop()
			if out := log.String(); !strings.Contains(out, tc.want) || strings.Contains(out, tc.never) {
				t.Errorf("log, want %q and never %q:\n%s", tc.want, tc.never, out)
			}
		})
	}
}
