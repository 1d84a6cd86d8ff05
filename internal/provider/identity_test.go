package provider

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// logBuffer collects log output from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// expectStoppedLoudly waits, at most within, for the service to stop with
// an error wrapping want that names storeID, logged at ERROR with a message
// beginning with logged; a create then finds no service to answer it.
func (h *harness) expectStoppedLoudly(t *testing.T, log *logBuffer, within time.Duration, want error, storeID, logged string) {
	t.Helper()
	select {
	case <-h.svc.Done():
	case <-time.After(within):
		t.Fatalf("the service kept serving %s after it should have stopped with %v", within, want)
	}
	if err := h.svc.Err(); !errors.Is(err, want) || !strings.Contains(err.Error(), storeID) {
		t.Errorf("Err() = %v, want %v naming %s", err, want, storeID)
	}
	if !strings.Contains(log.String(), "level=ERROR msg=\""+logged) {
		t.Errorf("log:\n%s", log.String())
	}
	if _, err := h.client.Create(ctxT(t), newRequest("after-stop", "x")); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("create after the stop: %v, want no responders", err)
	}
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

var storeIDPattern = regexp.MustCompile(`^store-[0-9a-f]{16}$`)

func TestAStoreHasAnIdentity(t *testing.T) {
	t.Chdir(t.TempDir())
	abs, err := filepath.Abs("data-rel")
	if err != nil {
		t.Fatal(err)
	}
	var id string
	t.Run("a new store gets an id and says at WARN that it is new and where it is", func(t *testing.T) {
		log := &logBuffer{}
		st, err := Open("data-rel", Options{Logger: log.logger()})
		if err != nil {
			t.Fatal(err)
		}
		id = st.ID()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if !storeIDPattern.MatchString(id) {
			t.Errorf("store id %q, want store- and 16 hex digits", id)
		}
		out := log.String()
		if !strings.Contains(out, "level=WARN msg=\"new store") || !strings.Contains(out, abs) || !strings.Contains(out, id) {
			t.Errorf("log does not warn that the store at %s is new:\n%s", abs, out)
		}
	})
	t.Run("the id survives a restart, and a store that is not new is not called new", func(t *testing.T) {
		log := &logBuffer{}
		st, err := Open("data-rel", Options{Logger: log.logger()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if st.ID() != id {
			t.Errorf("store id %q after a restart, want %q", st.ID(), id)
		}
		if strings.Contains(log.String(), "new store") {
			t.Errorf("a reopened store was called new:\n%s", log.String())
		}
	})
	t.Run("a store made before ids existed gets one when it is opened, and says so", func(t *testing.T) {
		dir := t.TempDir()
		st := openStore(t, dir, Options{})
		if _, err := st.Create(ctxT(t), newRequest("intent-old", "old")); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		// Rewrite the meta record as a store without ids left it.
		db, err := pebble.Open(dir, pebbleOptions(vfs.Default, quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := loadMeta(db)
		if err != nil {
			t.Fatal(err)
		}
		old := m.StoreID
		m.StoreID = ""
		if err := putMeta(db, m); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		log := &logBuffer{}
		st, err = Open(dir, Options{Logger: log.logger()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if !storeIDPattern.MatchString(st.ID()) || st.ID() == old {
			t.Errorf("store id %q; want a new one (the old was %q)", st.ID(), old)
		}
		if out := log.String(); !strings.Contains(out, "store had no id") || strings.Contains(out, "new store") {
			t.Errorf("log:\n%s", out)
		}
		if got := st.Stats(); got != counts(1, 1, 1) {
			t.Errorf("counts %+v, want 1, 1, 1 kept", got)
		}
	})
	t.Run("every create reply, the stats reply and the service's metadata name the store", func(t *testing.T) {
		h := newHarness(t, Options{}, ServiceConfig{})
		resp, err := h.client.Create(ctxT(t), newRequest("intent-id", "x"))
		if err != nil || resp.StoreID != h.st.ID() {
			t.Fatalf("create: %+v, %v; want store id %s", resp, err, h.st.ID())
		}
		info, err := h.client.Info(ctxT(t))
		host, _ := os.Hostname()
		want := Info{Counts: counts(1, 1, 1), StoreID: h.st.ID(), Instance: h.svc.Instance(), Host: host, PID: os.Getpid(),
			Keys:     KeyCounts{Live: 1},
			Scopes:   []ScopeCounts{{Scope: "default", Counts: counts(1, 1, 1), KeysLive: 1}},
			Lifetime: &Lifetime{KeyClockAllowance: "5m0s", KeyMargin: "1h0m0s", RecordsRetention: "0s"}}
		if err != nil || !reflect.DeepEqual(info, want) {
			t.Errorf("info %+v, %v; want %+v", info, err, want)
		}
		if c, err := h.client.Stats(ctxT(t)); err != nil || c != counts(1, 1, 1) {
			t.Errorf("stats %+v, %v", c, err)
		}
		pings, err := pingOthers(h.nc)
		if err != nil || len(pings) != 1 || pings[0].Metadata["store_id"] != h.st.ID() || pings[0].ID != h.svc.Instance() {
			t.Errorf("ping: %+v, %v; want one instance with store_id %s", pings, err, h.st.ID())
		}
	})
}

func TestOnlyOneInstanceServes(t *testing.T) {
	t.Run("a second instance with another data directory is refused with an error naming the first", func(t *testing.T) {
		h := newHarness(t, Options{}, ServiceConfig{})
		other := openStore(t, t.TempDir(), Options{})
		svc, err := Serve(connect(t, h.url), other, ServiceConfig{Logger: quietLogger()})
		if err == nil {
			_ = svc.Stop()
			t.Fatal("a second store's instance started beside the first")
		}
		host, _ := os.Hostname()
		var ie *InstanceError
		if !errors.Is(err, ErrAnotherInstance) || !errors.As(err, &ie) {
			t.Fatalf("error %v, want an *InstanceError", err)
		}
		for _, want := range []string{h.st.ID(), h.svc.Instance(), "host " + host, fmt.Sprintf("pid %d", os.Getpid())} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
		t.Run("and ten sends of one intent give one created, all from the first store", func(t *testing.T) {
			req := newRequest("intent-ten", "ten sends")
			outcomes := map[string]int{}
			for range 10 {
				resp, err := h.client.Create(ctxT(t), req)
				if err != nil {
					t.Fatal(err)
				}
				outcomes[resp.Outcome]++
				if resp.StoreID != h.st.ID() {
					t.Errorf("a reply from store %s, want %s", resp.StoreID, h.st.ID())
				}
			}
			if outcomes[OutcomeCreated] != 1 || outcomes[OutcomeReplayed] != 9 {
				t.Errorf("outcomes %v, want 1 created and 9 replayed", outcomes)
			}
			if got := other.Stats(); got != (Counts{}) {
				t.Errorf("the refused store counted %+v", got)
			}
		})
	})
	t.Run("an instance of another store that holds the lease but does not answer is refused by the lease", func(t *testing.T) {
		url := startNATS(t)
		kv := leaseKV(t, url, 30*time.Second)
		dead := LeaseHolder{StoreID: "store-00000000deadbeef", Instance: "gone", Host: "elsewhere", PID: 7}
		val, _ := json.Marshal(dead)
		if _, err := kv.Create(ctxT(t), LeaseKey, val); err != nil {
			t.Fatal(err)
		}
		st := openStore(t, t.TempDir(), Options{})
		svc, err := Serve(connect(t, url), st, ServiceConfig{Logger: quietLogger()})
		if err == nil {
			_ = svc.Stop()
			t.Fatal("started while another store holds the lease")
		}
		var ie *InstanceError
		if !errors.As(err, &ie) || ie.Via != "lease" || ie.Holder != dead ||
			!strings.Contains(err.Error(), "store-00000000deadbeef") || !strings.Contains(err.Error(), "holds the lease") {
			t.Errorf("error %v, want the lease holder named", err)
		}
		if a, _, found, err := readAdoption(ctxT(t), adoptionKV(t, url)); err != nil || found {
			t.Errorf("adoption record %+v, %v: the store refused by the lease was adopted", a, err)
		}
	})
}

// leaseKV opens the lease bucket on the server at url, creating it with ttl
// if it does not exist.
func leaseKV(t *testing.T, url string, ttl time.Duration) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctxT(t), LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: ttl})
	}
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// serveProcess starts a provider process serving dir until it is killed and
// returns who it is once it serves.
func serveProcess(t *testing.T, url, dir string, ttl time.Duration) (*exec.Cmd, LeaseHolder) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=serve", "PROVIDER_TEST_NATS="+url, "PROVIDER_TEST_DATA="+dir,
		"PROVIDER_TEST_LEASE_TTL="+ttl.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr logBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	var h LeaseHolder
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil {
		t.Fatalf("serving process: %v\n%s", err, stderr.String())
	}
	return cmd, h
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func TestAKilledInstancesLease(t *testing.T) {
	t.Run("a restart on the same store after SIGKILL takes over at once", func(t *testing.T) {
		url := startNATS(t)
		dir := t.TempDir()
		cmd, killed := serveProcess(t, url, dir, time.Minute)
		kill(t, cmd)
		kv := leaseKV(t, url, time.Minute)
		if e, err := kv.Get(ctxT(t), LeaseKey); err != nil || !strings.Contains(string(e.Value()), killed.Instance) {
			t.Fatalf("lease after the kill: %v; want it still held by %s", err, killed.Instance)
		}
		st := openStore(t, dir, Options{})
		start := time.Now()
		svc, err := Serve(connect(t, url), st, ServiceConfig{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("restart on the same store: %v", err)
		}
		defer func() { _ = svc.Stop() }()
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("taking over took %v; the lease lives a minute", took)
		}
		if e, err := kv.Get(ctxT(t), LeaseKey); err != nil || !strings.Contains(string(e.Value()), svc.Instance()) {
			t.Errorf("lease: %v; want it held by %s", err, svc.Instance())
		}
		resp, err := NewClient(connect(t, url)).Create(ctxT(t), newRequest("after-kill", "x"))
		if err != nil || resp.StoreID != killed.StoreID {
			t.Errorf("create: %+v, %v; want an answer from %s", resp, err, killed.StoreID)
		}
	})
}

func TestAnInstanceWithoutAConfirmedLeaseDoesNotAnswer(t *testing.T) {
	t.Run("an instance whose lease another instance took stops serving loudly", func(t *testing.T) {
		log := &logBuffer{}
		h := newHarness(t, Options{}, ServiceConfig{LeaseTTL: time.Second, Logger: log.logger()})
		kv := leaseKV(t, h.url, time.Second)
		thief := LeaseHolder{StoreID: "store-0000000000000bad", Instance: "thief", Host: "elsewhere", PID: 9}
		val, _ := json.Marshal(thief)
		if _, err := kv.Put(ctxT(t), LeaseKey, val); err != nil {
			t.Fatal(err)
		}
		h.expectStoppedLoudly(t, log, 5*time.Second, ErrLeaseLost, thief.StoreID, "LEASE LOST")
		if e, err := kv.Get(ctxT(t), LeaseKey); err != nil || !strings.Contains(string(e.Value()), "thief") {
			t.Errorf("the stopped instance touched the new holder's lease: %v", err)
		}
	})
	t.Run("after a reconnect a create gets a 503 until the lease is renewed", func(t *testing.T) {
		h := newHarness(t, Options{}, ServiceConfig{LeaseTTL: time.Minute})
		if _, err := h.client.Create(ctxT(t), newRequest("before", "x")); err != nil {
			t.Fatal(err)
		}
		nc := h.svc.nc
		before := nc.Stats().Reconnects
		if err := nc.ForceReconnect(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for nc.Stats().Reconnects == before || !nc.IsConnected() {
			if time.Now().After(deadline) {
				t.Fatal("no reconnect")
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Let the server know the resubscriptions.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		_, err := h.client.Create(ctxT(t), newRequest("after", "x"))
		se, ok := errors.AsType[*ServiceError](err)
		if !ok || se.Code != CodeUnavailable || !IsTransient(err) {
			t.Fatalf("first create after the reconnect: %v, want a transient 503", err)
		}
		for {
			resp, err := h.client.Create(ctxT(t), newRequest("after", "x"))
			if err == nil {
				if resp.Outcome != OutcomeCreated {
					t.Errorf("outcome %s; the 503 must not have created anything", resp.Outcome)
				}
				break
			}
			if !IsTransient(err) || time.Now().After(deadline) {
				t.Fatalf("create after renewal: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("a call accepted under the lease but reaching the writer after it lapsed is not written", func(t *testing.T) {
		delay := &atomic.Int64{}
		h := newHarness(t, Options{FS: slowSyncFS{FS: vfs.NewMem(), delay: delay}}, ServiceConfig{LeaseTTL: time.Minute})
		delay.Store(int64(400 * time.Millisecond))
		results := make(chan error, 2)
		go func() { _, err := h.client.Create(ctxT(t), newRequest("first", "x")); results <- err }()
		time.Sleep(100 * time.Millisecond) // the first call's group is syncing
		var queued CreateResponse
		go func() {
			var err error
			queued, err = h.client.Create(ctxT(t), newRequest("queued", "x"))
			results <- err
		}()
		time.Sleep(100 * time.Millisecond) // the second call is accepted and waits for the writer
		h.svc.lease.mu.Lock()
		h.svc.lease.validUntil = time.Now().Add(-time.Millisecond)
		h.svc.lease.mu.Unlock()
		var errs []error
		for range 2 {
			errs = append(errs, <-results)
		}
		delay.Store(0)
		var unavailable int
		for _, err := range errs {
			if se, ok := errors.AsType[*ServiceError](err); ok && se.Code == CodeUnavailable {
				unavailable++
			} else if err != nil {
				t.Fatalf("create: %v", err)
			}
		}
		if unavailable != 1 || queued.Outcome != "" {
			t.Fatalf("%d calls refused as unavailable (queued call: %+v); want the queued one refused", unavailable, queued)
		}
		if c := h.st.Stats(); c.RequestsReceived != 1 || c.CreatesExecuted != 1 {
			t.Fatalf("counts %+v: the call that reached the writer after the lease lapsed was written", c)
		}
	})
	t.Run("a create after the lease ran out without renewal gets a 503", func(t *testing.T) {
		h := newHarness(t, Options{}, ServiceConfig{LeaseTTL: time.Minute})
		h.svc.lease.mu.Lock()
		h.svc.lease.validUntil = time.Now().Add(-time.Millisecond)
		h.svc.lease.mu.Unlock()
		_, err := h.client.Create(ctxT(t), newRequest("late", "x"))
		if se, ok := errors.AsType[*ServiceError](err); !ok || se.Code != CodeUnavailable {
			t.Fatalf("create: %v, want a 503", err)
		}
		if got := h.st.Stats(); got != (Counts{}) {
			t.Errorf("counts %+v, want nothing received", got)
		}
	})
}

// slowSyncFS delays every sync of the files it creates by delay (in
// nanoseconds; 0 = no delay).
type slowSyncFS struct {
	vfs.FS
	delay *atomic.Int64
}

func (fs slowSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return slowSyncFile{f, fs.delay}, err
}

func (fs slowSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return slowSyncFile{f, fs.delay}, err
}

type slowSyncFile struct {
	vfs.File
	delay *atomic.Int64
}

func (f slowSyncFile) wait() { time.Sleep(time.Duration(f.delay.Load())) }

func (f slowSyncFile) Sync() error {
	f.wait()
	return f.File.Sync()
}

func (f slowSyncFile) SyncData() error {
	f.wait()
	return f.File.SyncData()
}

func (f slowSyncFile) SyncTo(length int64) (bool, error) {
	f.wait()
	return f.File.SyncTo(length)
}

// createEndpointStats reads the create endpoint's figures from the micro
// STATS reply.
func createEndpointStats(t *testing.T, h *harness) (*micro.EndpointStats, CreateStats) {
	t.Helper()
	subject, _ := micro.ControlSubject(micro.StatsVerb, ServiceName, h.svc.Instance())
	msg, err := h.nc.RequestWithContext(ctxT(t), subject, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(msg.Data, &stats); err != nil {
		t.Fatal(err)
	}
	for _, e := range stats.Endpoints {
		if e.Name == "create" {
			var cs CreateStats
			if err := json.Unmarshal(e.Data, &cs); err != nil {
				t.Fatalf("create endpoint data %s: %v", e.Data, err)
			}
			return e, cs
		}
	}
	t.Fatalf("no create endpoint in %s", msg.Data)
	return nil, CreateStats{}
}

func TestTheCreateEndpointsStatsAreHonest(t *testing.T) {
	t.Run("a create's recorded processing time covers its commit", func(t *testing.T) {
		delay := &atomic.Int64{}
		h := newHarness(t, Options{FS: slowSyncFS{FS: vfs.NewMem(), delay: delay}}, ServiceConfig{})
		const commit = 150 * time.Millisecond
		delay.Store(int64(commit))
		start := time.Now()
		_, err := h.client.Create(ctxT(t), newRequest("slow", "x"))
		took := time.Since(start)
		delay.Store(0)
		if err != nil {
			t.Fatal(err)
		}
		if took < commit {
			t.Fatalf("the call took %v; the slow sync did not apply", took)
		}
		e, cs := createEndpointStats(t, h)
		if cs.NumRequests != 1 || cs.ProcessingTime < commit || cs.AverageProcessingTime < commit {
			t.Errorf("create data %+v; want one request taking at least %v", cs, commit)
		}
		t.Logf("micro's own figure (the handler only): %v; answered after: %v", e.ProcessingTime, cs.ProcessingTime)
	})
	t.Run("a store failure counts as an error", func(t *testing.T) {
		h := newHarness(t, Options{}, ServiceConfig{})
		if err := h.st.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := h.client.Create(ctxT(t), newRequest("closed", "x")); err == nil {
			t.Fatal("a closed store answered")
		}
		// micro counts a handler's error once the handler has returned,
		// which may be just after its reply reached the caller.
		e, cs := createEndpointStats(t, h)
		for deadline := time.Now().Add(5 * time.Second); e.NumErrors == 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			e, cs = createEndpointStats(t, h)
		}
		if e.NumErrors != 1 || cs.NumErrors != 1 || !strings.Contains(cs.LastError, "closed") {
			t.Errorf("micro errors %d, create data %+v; want one error naming the closed store", e.NumErrors, cs)
		}
	})
}

// natsAt runs a NATS server with JetStream on port with its store in dir, so
// that a test can stop it and start it again with the same state.
func natsAt(t *testing.T, port int, dir string) *server.Server {
	t.Helper()
	return startServer(t, &server.Options{Port: port, JetStream: true, StoreDir: dir})
}

func TestAnInstanceThatLostNATSLongerThanItsLeaseDoesNotAnswerForIt(t *testing.T) {
	jsDir := t.TempDir()
	ns := natsAt(t, -1, jsDir)
	url := ns.ClientURL()
	port := ns.Addr().(*net.TCPAddr).Port
	const ttl = time.Second

	// A serves, then loses NATS for longer than its lease.
	log := &logBuffer{}
	stA := openStore(t, t.TempDir(), Options{})
	ncA, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(3*time.Second), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncA.Close)
	a, err := Serve(ncA, stA, ServiceConfig{Logger: log.logger(), LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	ns.Shutdown()
	ns.WaitForShutdown()
	time.Sleep(ttl + ttl/2)
	natsAt(t, port, jsDir)

	// B, of another store that an operator adopted in A's place, starts
	// before A is back and takes the expired lease.
	stB := openStore(t, t.TempDir(), Options{})
	b, err := Serve(connect(t, url), stB, ServiceConfig{Logger: quietLogger(), Replaces: stA.ID()})
	if err != nil {
		t.Fatalf("B: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })

	// A comes back: it must find B adopted (and holding the lease), stop,
	// and never answer a create in between.
	client := NewClient(connect(t, url))
	client.Timeout = time.Second
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		resp, err := client.Create(ctxT(t), newRequest(fmt.Sprintf("intent-%d", i), "x"))
		switch {
		case err == nil && resp.StoreID != stB.ID():
			t.Fatalf("create %d answered by store %s; B (%s) holds the lease", i, resp.StoreID, stB.ID())
		case err != nil && !IsTransient(err):
			t.Fatalf("create %d: %v", i, err)
		}
		select {
		case <-a.Done():
		default:
			if time.Now().After(deadline) {
				t.Fatalf("A did not stop; log:\n%s", log.String())
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		break
	}
	if err := a.Err(); !errors.Is(err, ErrStoreReplaced) || !strings.Contains(err.Error(), stB.ID()) {
		t.Errorf("A stopped with %v, want ErrStoreReplaced naming %s", err, stB.ID())
	}
	if got := stA.Stats(); got != (Counts{}) {
		t.Errorf("A counted %+v after it lost NATS", got)
	}
	if e, err := leaseKV(t, url, ttl).Get(ctxT(t), LeaseKey); err != nil || !strings.Contains(string(e.Value()), b.Instance()) {
		t.Errorf("lease after A stopped: %v; want it still held by B (%s)", err, b.Instance())
	}
}

func TestTheLeaseNeedsAServerThatCanKeepIt(t *testing.T) {
	t.Run("a server without JetStream is refused at once, saying why", func(t *testing.T) {
		ns := startServer(t, &server.Options{Port: -1})
		st := openStore(t, t.TempDir(), Options{})
		start := time.Now()
		_, err := Serve(connect(t, ns.ClientURL()), st, ServiceConfig{Logger: quietLogger()})
		if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) || !strings.Contains(err.Error(), "needs JetStream") {
			t.Errorf("error %v, want a refusal naming JetStream", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("took %v to refuse", took)
		}
	})
	t.Run("a lease bucket without a TTL is refused, since a lease in it would never end", func(t *testing.T) {
		url := startNATS(t)
		leaseKV(t, url, 0)
		st := openStore(t, t.TempDir(), Options{})
		_, err := Serve(connect(t, url), st, ServiceConfig{Logger: quietLogger()})
		if !errors.Is(err, errLeaseBucket) || !strings.Contains(err.Error(), "no TTL") {
			t.Errorf("error %v, want the bucket refused", err)
		}
	})
}
