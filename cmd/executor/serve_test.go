package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/cmd/internal/serve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// serve --embedded starts its own server and connects to it: a connection
// flag given with it would be ignored without a word, so it is refused
// before anything starts.
func TestServeEmbeddedRefusesConnectionFlagsItWouldIgnore(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want []string // words the error names
	}{
		{"a server URL is refused", []string{"--server", "nats://127.0.0.1:1"}, []string{"--embedded", "--server"}},
		{"a server URL is refused along with credentials", []string{"--creds", "x.creds", "--server", "nats://127.0.0.1:1"}, []string{"--embedded", "--server"}},
		{"a user and password are refused", []string{"--user", "someone", "--password", "secret"}, []string{"--embedded", "--user", "--password"}},
		{"a credentials file is refused", []string{"--creds", "x.creds"}, []string{"--embedded", "--creds"}},
		{"an nkey is refused", []string{"--nkey", "x.nk"}, []string{"--embedded", "--nkey"}},
		{"TLS files are refused", []string{"--tls-ca", "ca.pem", "--tlscert", "c.pem"}, []string{"--embedded", "--tls-ca", "--tlscert"}},
		{"TLS first is refused", []string{"--tls-first"}, []string{"--embedded", "--tls-first"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--embedded", "--insecure-allow-unsigned", "--data", data, "--listen", "127.0.0.1:0"}, c.args...)
			var errOut bytes.Buffer
			// Were it not refused, it would serve until this runs out.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := run(ctx, args, io.Discard, &errOut)
			if !errors.Is(err, errUsage) || exitCode(err) != 2 {
				t.Fatalf("%v: %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not name %s", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(errOut.String(), "secret") {
				t.Errorf("the refusal echoes the password: %v\n%s", err, errOut.String())
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused command made its data directory: %v", err)
			}
		})
	}
}

// The environment's NATS settings are for --server: with --embedded they
// neither fail the command nor point it at another server.
func TestServeEmbeddedLeavesTheEnvironmentsConnectionSettingsOut(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("NATS_USER", "someone")
	t.Setenv("NATS_PASSWORD", "secret")
	t.Setenv("NATS_CA", missing)
	p := serveEmbedded(t, "--insecure-allow-unsigned")
	p.awaitConsuming(t, 30*time.Second)
	if !strings.Contains(p.log.String(), "without the NATS credentials and TLS settings of the environment") {
		t.Errorf("the log does not say the environment's settings were left out:\n%s", p.log.String())
	}
	if strings.Contains(p.log.String(), "secret") {
		t.Errorf("the log shows the environment's password:\n%s", p.log.String())
	}
}

// The embedded task service takes provider serve's flags with the same
// names and defaults.
func TestServeEmbeddedHasTheServiceFlagsOfProviderServeWithTheirDefaults(t *testing.T) {
	fs := newServeFlags(io.Discard).fs
	for _, c := range []struct{ name, want string }{
		{"key-clock-allowance", provider.DefaultKeyClockAllowance.String()},
		{"key-margin", provider.DefaultKeyMargin.String()},
		{"records-retention", "0s"},
		{"compact-every", provider.DefaultCompactEvery.String()},
		{"metrics-max-scopes", strconv.Itoa(metrics.DefaultMaxScopeLabels)},
	} {
		t.Run("--"+c.name+" defaults to "+c.want, func(t *testing.T) {
			fl := fs.Lookup(c.name)
			if fl == nil {
				t.Fatalf("serve has no --%s", c.name)
			}
			if fl.DefValue != c.want {
				t.Errorf("--%s defaults to %s, want %s", c.name, fl.DefValue, c.want)
			}
		})
	}
}

// Values provider serve refuses are refused here too, and so are the
// service's flags without --embedded, where no service runs to take them.
func TestServeRefusesServiceFlagsItCannotUse(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string // what the error names
	}{
		{"a negative clock allowance is refused", []string{"--embedded", "--key-clock-allowance", "-1s"}, "--key-clock-allowance"},
		{"a negative margin is refused", []string{"--embedded", "--key-margin", "-1m"}, "--key-margin"},
		{"a negative records retention is refused", []string{"--embedded", "--records-retention", "-1h"}, "--records-retention"},
		{"a compaction period of zero is refused", []string{"--embedded", "--compact-every", "0s"}, "--compact-every"},
		{"no scope label at all is refused", []string{"--embedded", "--metrics-max-scopes", "0"}, "--metrics-max-scopes"},
		{"a margin without --embedded is refused", []string{"--server", "nats://127.0.0.1:1", "--key-margin", "1m"}, "--key-margin without --embedded"},
		{"a scope label bound without --embedded is refused", []string{"--metrics-max-scopes", "5"}, "--metrics-max-scopes without --embedded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--insecure-allow-unsigned", "--data", data, "--listen", "127.0.0.1:0"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := run(ctx, args, io.Discard, io.Discard)
			if !errors.Is(err, errUsage) || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: %v (exit %d), want a usage error naming %s", args, err, exitCode(err), c.want)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused command made its data directory: %v", err)
			}
		})
	}
}

// The flags reach the hosted service: with no allowance or margin, keys
// whose approvals expired are compacted at the next --compact-every, the
// records are removed after --records-retention, and /metrics names one
// scope and sums the others under "_other" (--metrics-max-scopes 1).
func TestServeEmbeddedPassesTheServiceFlagsToItsTaskService(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := serveEmbedded(t, "--insecure-allow-unsigned", "--http", addr, "--key-clock-allowance", "0", "--key-margin", "0",
		"--compact-every", "100ms", "--records-retention", "1s", "--metrics-max-scopes", "1")
	nc, err := nats.Connect(p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := provider.NewClient(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Valid for two more seconds: a call for a new key whose deadline has
	// passed is refused (key_deadline), so the keys are made just before.
	expired := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	for _, scope := range []string{"alpha", "beta"} {
		req, err := provider.NewScopedRequest(scope, "intent-"+scope, provider.Task{Title: "expired in " + scope})
		if err != nil {
			t.Fatal(err)
		}
		req.NotAfter = expired
		res, err := c.Create(ctx, req)
		if err != nil || res.Outcome != provider.OutcomeCreated {
			t.Fatalf("creating in %s: %+v, %v", scope, res, err)
		}
	}
	var info provider.Info
	waitFor(t, 20*time.Second, "both keys compacted and the four records retired", func() bool {
		info, err = c.Info(ctx)
		return err == nil && info.Keys.Compacted == 2 && info.Keys.RecordsRetired == 4
	})
	if info.Keys.Live != 0 || info.TasksExisting != 2 {
		t.Errorf("after compaction: %+v; want no live key and both tasks kept", info)
	}
	m := scrape(t, addr)
	for name, want := range map[string]float64{
		"sendtwice_keys_compacted":                                              2,
		"sendtwice_keys_live":                                                   0,
		`sendtwice_scope_creates_executed{scope="alpha"}`:                       1,
		`sendtwice_scope_creates_executed{scope="` + metrics.OtherScopes + `"}`: 1,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("/metrics %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if _, ok := m[`sendtwice_scope_creates_executed{scope="beta"}`]; ok {
		t.Errorf("/metrics labels scope beta past --metrics-max-scopes 1")
	}
}

// serve sets up the streams and the consumer once at start: by the time it
// consumes, provisioning has been recorded once (each setting-up records
// what the server applied, and the record keeps its history).
func TestServeSetsUpTheStreamsAndTheConsumerOnce(t *testing.T) {
	p := serveEmbedded(t, "--insecure-allow-unsigned")
	waitFor(t, 30*time.Second, "serve to consume", func() bool { return strings.Contains(p.log.String(), `msg=consuming`) })
	_, js := testenv.Connect(t, p.url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	history, err := recordBucket(ctx, t, js).History(ctx, topology.RecordKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 1 {
		t.Errorf("serve set up the streams and the consumer %d times at start, want once", len(history))
	}
}

func TestTheIntentLedgerIsProvisionedBesideTheStreams(t *testing.T) {
	t.Run("serve --no-provision with a CalDAV collection and no ledger bucket refuses to start and says to provision it", func(t *testing.T) {
		env := testenv.Start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// The streams and the consumer, as a provisioning user left them
		// before the ledger existed.
		if _, err := topology.SetUp(ctx, env.JS, topology.Config{}, topology.SetUpOptions{}); err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		err := run(ctx, []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--no-provision", "--id", "exec-1",
			"--task-service", "caldav", "--caldav-url", "http://127.0.0.1:1/tasks/"}, io.Discard, &errOut)
		if !errors.Is(err, ledger.ErrNoBucket) || !strings.Contains(err.Error(), "provision") {
			t.Errorf("serve: %v; want it to refuse for want of the ledger bucket, naming provision\n%s", err, errOut.String())
		}
		if _, err := env.JS.KeyValue(ctx, ledger.Bucket); err == nil {
			t.Error("serve --no-provision created the ledger bucket")
		}
	})
	t.Run("provision makes the ledger bucket with per-key TTLs, replicated like the streams", func(t *testing.T) {
		env := testenv.Start(t)
		var out bytes.Buffer
		if err := run(context.Background(), []string{"provision", "--server", env.URL()}, &out, io.Discard); err != nil {
			t.Fatalf("provision: %v", err)
		}
		if !strings.Contains(out.String(), "intent ledger "+ledger.Bucket+" ready") {
			t.Errorf("provision printed %q; want it to name the intent ledger", out.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := env.JS.KeyValue(ctx, redrive.Bucket); err != nil {
			t.Errorf("after provision, the redrive record %s: %v", redrive.Bucket, err)
		}
		if _, err := ledger.Open(ctx, env.JS, ledger.Options{}); err != nil {
			t.Fatalf("after provision: %v", err)
		}
		kv, err := env.JS.KeyValue(ctx, ledger.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, err := env.JS.Stream(ctx, topology.ApprovalsStream)
		if err != nil {
			t.Fatal(err)
		}
		if st.LimitMarkerTTL() <= 0 || st.Config().Replicas != s.CachedInfo().Config.Replicas {
			t.Errorf("bucket: limit-marker TTL %v, replicas %d; want a TTL and the streams' %d replicas",
				st.LimitMarkerTTL(), st.Config().Replicas, s.CachedInfo().Config.Replicas)
		}
	})
}

func TestMaxBytesIsValidatedAndProvisionedOnEveryStream(t *testing.T) {
	for _, cmd := range []string{"serve", "provision"} {
		for _, bad := range []string{"0", "-2", "1000"} {
			err := run(context.Background(), []string{cmd, "--max-bytes", bad}, io.Discard, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--max-bytes") {
				t.Errorf("%s --max-bytes %s: %v, want a usage error naming --max-bytes", cmd, bad, err)
			}
		}
	}
	env := testenv.Start(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"provision", "--server", env.URL(), "--max-bytes", "8388608"}, &out, io.Discard); err != nil {
		t.Fatalf("provision: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{topology.ApprovalsStream, topology.ReceiptsStream, topology.DeadLetterStream} {
		s, err := env.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.MaxBytes != 8<<20 || c.MaxMsgSize <= 0 {
			t.Errorf("%s: MaxBytes %d, MaxMsgSize %d; want 8 MiB and a size limit", name, c.MaxBytes, c.MaxMsgSize)
		}
	}
}

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

// rewriteConsumer gives the executors' consumer another filter and a
// budget of one, as the operator role could through the legacy create
// subject, without touching the record of what was provisioned.
func rewriteConsumer(t *testing.T, env *testenv.Env) {
	t.Helper()
	testenv.ChangeConsumer(t, env.JS, func(cc *jetstream.ConsumerConfig) { cc.FilterSubject, cc.MaxDeliver = "approvals.nothing", 1 })
}

func TestServeWithNoProvisionRefusesAConsumerRewrittenBehindProvisioningsBack(t *testing.T) {
	env := testenv.Start(t)
	rewriteConsumer(t, env)
	var errOut testenv.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--no-provision", "--id", "exec-1"}, io.Discard, &errOut)
	if err == nil {
		t.Fatal("serve consumed from a rewritten consumer")
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	expectLines(t, "the refusal", err.Error(),
		`consumer executor: filter_subject: expected "approvals.>", found "approvals.nothing"`,
		"consumer executor: max_deliver: expected -1, found 1", "executor provision")
}

func TestServeStopsWhenItsConsumerIsRewrittenWhileItRuns(t *testing.T) {
	env := testenv.Start(t)
	var errOut testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--no-provision", "--id", "exec-1",
			"--consumer-check", "1s"}, io.Discard, &errOut)
	}()
	s := testenv.Seed(t)
	rc, err := demo.SendAndWait(context.Background(), env.JS, s.Original.Envelope(), 30*time.Second)
	if err != nil {
		t.Fatalf("sending before the rewrite: %v\n%s", err, errOut.String())
	}
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("outcome %s before the rewrite", rc.Outcome)
	}
	rewriteConsumer(t, env)
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve kept running on a rewritten consumer")
	}
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "max_deliver: expected -1, found 1") {
		t.Fatalf("serve ended with %v (exit status %d); want exit status 1 naming max_deliver", err, exitCode(err))
	}
	if !strings.Contains(errOut.String(), "level=ERROR") || !strings.Contains(errOut.String(), "the consumer was changed since it was provisioned") {
		t.Fatalf("no ERROR about the consumer in the log:\n%s", errOut.String())
	}
}

func TestServeRefusesAConsumerCheckOfLessThanASecond(t *testing.T) {
	err := run(context.Background(), []string{"serve", "--server", "nats://127.0.0.1:1", "--insecure-allow-unsigned", "--consumer-check", "10ms"}, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--consumer-check 10ms: want at least 1s") {
		t.Fatalf("err %v (exit status %d); want a usage error", err, exitCode(err))
	}
}

// inProcess is "executor serve --embedded" running in this test's process.
type inProcess struct {
	url  string
	data string     // the --data directory serveEmbedded gave it
	done chan error // run's result, once it returns
	log  *syncBuffer
}

// serveEmbedded runs "executor serve --embedded" with args on a free port
// and a data directory of the test's, in this process, and waits until its
// server accepts connections. Cleanup stops it.
func serveEmbedded(t *testing.T, args ...string) *inProcess {
	t.Helper()
	port := freePort(t)
	p := &inProcess{url: fmt.Sprintf("nats://127.0.0.1:%d", port), data: filepath.Join(t.TempDir(), "data"), done: make(chan error, 1), log: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		p.done <- run(ctx, append([]string{"serve", "--embedded", "--data", p.data,
			"--listen", fmt.Sprintf("127.0.0.1:%d", port)}, args...), &bytes.Buffer{}, p.log)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("executor output:\n%s", p.log.String())
		}
	})
	waitFor(t, 30*time.Second, "the embedded server", func() bool {
		nc, err := nats.Connect(p.url)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return p
}

// awaitConsuming waits up to within until p logs that it consumes; it
// fails the test if serve ends first.
func (p *inProcess) awaitConsuming(t *testing.T, within time.Duration) {
	t.Helper()
	waitFor(t, within, "serve --embedded to consume", func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("serve --embedded ended: %v\n%s", err, p.log.String())
		default:
		}
		return strings.Contains(p.log.String(), "consuming")
	})
}

func TestAnEmbeddedExecutorWhoseTaskServiceLosesItsLeaseStops(t *testing.T) {
	p := serveEmbedded(t, "--insecure-allow-unsigned", "--log-level", "warn")
	_, js := testenv.Connect(t, p.url)
	var kv jetstream.KeyValue
	var err error
	waitFor(t, 30*time.Second, "the embedded task service's lease", func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		kv, err = js.KeyValue(c, provider.LeaseBucket)
		if err != nil {
			return false
		}
		_, err = kv.Get(c, provider.LeaseKey)
		return err == nil
	})
	// Another store takes the lease, as a second instance would once this
	// one's renewals stopped reaching the server.
	thief, _ := json.Marshal(provider.LeaseHolder{StoreID: "store-0000000000000bad", Instance: "thief", Host: "elsewhere", PID: 9})
	if _, err := kv.Put(context.Background(), provider.LeaseKey, thief); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err == nil || !strings.Contains(err.Error(), "the embedded task service stopped serving") || !strings.Contains(err.Error(), "store-0000000000000bad") {
			t.Fatalf("serve ended with %v; want an error saying the task service stopped, naming the new holder\n%s", err, p.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve kept running after its task service lost the lease\n%s", p.log.String())
	}
}

func TestServeRefusesToStartWithoutATrustPolicy(t *testing.T) {
	_, _, err := runCLI(context.Background(), "serve", "--server", "nats://127.0.0.1:1")
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--trusted-approvers") || !strings.Contains(err.Error(), "--insecure-allow-unsigned") {
		t.Fatalf("serve without a trust policy: %v, want a usage error naming both flags", err)
	}
}

func TestServeWithTrustedApproversAcceptsOnlySignedApprovals(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	startServeProcess(t, "--embedded", "--data", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", "exec-trust", "--log-level", "warn",
		"--trusted-approvers", filepath.Join("..", "..", "testdata", "signed", "trusted-approvers.json"))
	var nc *nats.Conn
	waitFor(t, 30*time.Second, "the embedded server", func() bool {
		var err error
		nc, err = nats.Connect(url)
		return err == nil
	})
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	signed, err := scenario.BuildSigned(scenario.TestKey(), now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unsigned := testenv.Seed(t)
	var rc *document.Receipt
	waitFor(t, 30*time.Second, "a receipt for the unsigned approval", func() bool {
		rc, err = demo.SendAndWait(context.Background(), js, unsigned.Original.Envelope(), 5*time.Second)
		return err == nil
	})
	if rc.Outcome != document.OutcomeRejected || rc.Rejection.Check != "signature" {
		t.Fatalf("unsigned approval: %s %+v, want rejected at signature", rc.Outcome, rc.Rejection)
	}
	rc, err = demo.SendAndWait(context.Background(), js, signed.Original.Envelope(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("signed approval: %s %+v, want created", rc.Outcome, rc.Rejection)
	}
}

func TestARevokedReviewersApprovalIsRejectedAtSignatureAfterSIGHUPWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted-approvers.json")
	reviewer := scenario.TestKey()
	other, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.WriteTrusted(trusted, sign.ApproverFor(scenario.Reviewer, reviewer.Public()), sign.ApproverFor("reviewer-2", other.Public())); err != nil {
		t.Fatal(err)
	}
	p := serveEmbedded(t, "--trusted-approvers", trusted, "--id", "exec-reload", "--log-level", "info")
	_, js := testenv.Connect(t, p.url)
	seed, err := scenario.BuildSigned(reviewer, time.Now().UTC().Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var rc *document.Receipt
	waitFor(t, 30*time.Second, "a receipt for the trusted reviewer's approval", func() bool {
		rc, err = demo.SendAndWait(context.Background(), js, seed.Original.Envelope(), 5*time.Second)
		return err == nil
	})
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("the trusted reviewer's approval: %s %+v, want created", rc.Outcome, rc.Rejection)
	}

	// Revoke reviewer-1: the file now names reviewer-2 only.
	if err := sign.WriteTrusted(trusted, sign.ApproverFor("reviewer-2", other.Public())); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the reload to be logged", func() bool {
		return strings.Contains(p.log.String(), "trusted approvers reloaded")
	})
	logged := p.log.String()
	if !strings.Contains(logged, scenario.Reviewer+" ("+reviewer.ID+", scopes default)") || !strings.Contains(logged, "removed") {
		t.Errorf("the reload does not log the removed reviewer:\n%s", logged)
	}
	rc, err = demo.SendAndWait(context.Background(), js, seed.NewIntent.Envelope(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != document.OutcomeRejected || rc.Rejection.Check != "signature" {
		t.Fatalf("the revoked reviewer's new approval: %s %+v, want rejected at signature", rc.Outcome, rc.Rejection)
	}

	// A file that does not load keeps the approvers loaded before.
	if err := os.WriteFile(trusted, []byte(`{"approvers":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the failed reload to be logged", func() bool {
		return strings.Contains(p.log.String(), "reloading the trusted approvers failed")
	})
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		t.Fatalf("serve stopped after a failed reload: %v", err)
	default:
	}
}

func TestAReloadOfAFileThatDoesNotLoadKeepsTheApproversLoadedBefore(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "trusted.json")
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	if err := sign.WriteTrusted(p, sign.ApproverFor("alice", k1.Public())); err != nil {
		t.Fatal(err)
	}
	keys, err := sign.LoadTrusted(p)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := sign.WriteTrusted(p, sign.ApproverFor("bob", k2.Public())); err != nil {
		t.Fatal(err)
	}
	if err := serve.ReloadTrusted(p, keys, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `added="[bob (`+k2.ID+`, scopes default)]"`) || !strings.Contains(logs.String(), `removed="[alice (`+k1.ID+`, scopes default)]"`) {
		t.Errorf("the reload log does not name who was added and removed:\n%s", logs.String())
	}
	if err := os.WriteFile(p, []byte(`{"approvers":[{"name":"x"}]} trailing`), 0o644); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := serve.ReloadTrusted(p, keys, log); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if _, err := keys.Lookup(k2.ID); err != nil || keys.Len() != 1 {
		t.Fatalf("after a failed reload: %d approvers, bob %v; want bob kept", keys.Len(), err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), p) {
		t.Errorf("the failed reload is not logged as an error naming the file:\n%s", logs.String())
	}
}
