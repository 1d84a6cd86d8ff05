package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/proctest"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// syncBuffer collects a child process's output.
type syncBuffer = testenv.Buffer

func startNATS(t *testing.T) string {
	t.Helper()
	return testenv.NATS(t)
}

// invoke runs one command line with NATS_URL set to url and returns its
// standard output and error.
func invoke(t *testing.T, url string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := func(k string) string {
		if k == "NATS_URL" {
			return url
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := newApp(&stdout, &stderr, env).run(ctx, args)
	return stdout.String(), stderr.String(), err
}

func request(intent, content string) provider.CreateRequest {
	req, err := provider.NewRequest(intent, provider.Task{Title: content})
	if err != nil {
		panic(err)
	}
	return req
}

func TestUsage(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr error // nil, flag.ErrHelp or errUsage
		inOut   string
		inErr   string
	}{
		{"help lists every subcommand", []string{"--help"}, nil, "provider records", ""},
		{"no subcommand is a usage error", nil, errUsage, "", "Subcommands:"},
		{"an unknown subcommand is a usage error", []string{"launch"}, errUsage, "", "Usage:"},
		{"serve --help explains the data directory", []string{"serve", "--help"}, flag.ErrHelp, "", "Pebble database"},
		{"serve without --data is a usage error", []string{"serve"}, errUsage, "", ""},
		{"records without --kind is a usage error", []string{"records"}, errUsage, "", ""},
		{"records with an unknown kind is a usage error", []string{"records", "--kind", "all"}, errUsage, "", ""},
		{"fault without --drop-replies is a usage error", []string{"fault"}, errUsage, "", ""},
		{"adopt --help says why it is dangerous", []string{"adopt", "--help"}, flag.ErrHelp, "", "is created again, as a second task"},
		{"adopt without --data is a usage error", []string{"adopt", "--replace", "store-00000000000000ff"}, errUsage, "", ""},
		{"adopt with a --replace that is not a store id is a usage error", []string{"adopt", "--data", "x", "--replace", "old"}, errUsage, "", ""},
		{"a stray argument is a usage error", []string{"records", "--kind", "tasks", "extra"}, errUsage, "", ""},
		{"stats is gone: executor status shows the counters", []string{"stats"}, errUsage, "", "executor status"},
		{"delete without a task is a usage error", []string{"delete"}, errUsage, "", ""},
		{"delete naming a task id and a key is a usage error", []string{"delete", "--task-id", "fake-task-0001", "--intent", "i"}, errUsage, "", ""},
		{"delete with a bad scope is a usage error", []string{"delete", "--intent", "i", "--scope", "A"}, errUsage, "", ""},
		{"serve with a negative key margin is a usage error", []string{"serve", "--data", "x", "--key-margin", "-1s"}, errUsage, "", ""},
		{"an unknown log format is a usage error", []string{"records", "--kind", "tasks", "--log-format", "xml"}, errUsage, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := invoke(t, "nats://127.0.0.1:1", tc.args...)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(out, tc.inOut) || !strings.Contains(errOut, tc.inErr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q in them", out, errOut, tc.inOut, tc.inErr)
			}
		})
	}
}

// startServe runs provider serve with args in the background and returns
// its log and a stop that cancels it and fails the test unless serve
// returns without an error within 20 seconds.
func startServe(t *testing.T, args ...string) (*syncBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	serveLog := &syncBuffer{}
	served := make(chan error, 1)
	go func() {
		served <- newApp(&bytes.Buffer{}, serveLog, func(string) string { return "" }).run(ctx, args)
	}()
	stop := func() {
		t.Helper()
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("serve: %v\n%s", err, serveLog.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not stop")
		}
	}
	return serveLog, stop
}

func TestServeRecordsDeleteAndTheTestsFaultSwitch(t *testing.T) {
	url := startNATS(t)
	dir := t.TempDir()

	serveLog, stopServe := startServe(t, "serve", "--server", url, "--data", dir, "--allow-faults", "--log-format", "json")

	nc, _ := testenv.Connect(t, url)
	client := provider.NewClient(nc)
	client.Timeout = time.Second
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := client.Stats(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service did not come up; log:\n%s", serveLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	req := request("intent-cli", "check items")
	for _, want := range []string{provider.OutcomeCreated, provider.OutcomeReplayed} {
		resp, err := client.Create(context.Background(), req)
		if err != nil || resp.Outcome != want {
			t.Fatalf("create: %+v, %v; want %s", resp, err, want)
		}
	}

	info, err := client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("serve collects garbage at its own target when GOGC is unset", func(t *testing.T) {
		if want := fmt.Sprintf(`"gogc":%d`, serveGCPercent); !strings.Contains(serveLog.String(), want) {
			t.Errorf("serve's log does not say %s:\n%s", want, serveLog.String())
		}
	})
	t.Run("serve on another data directory is refused, naming the running instance", func(t *testing.T) {
		_, errOut, err := invoke(t, url, "serve", "--data", t.TempDir())
		if !errors.Is(err, provider.ErrAnotherInstance) || !strings.Contains(err.Error(), info.StoreID) ||
			!strings.Contains(err.Error(), "pid "+strconv.Itoa(info.PID)) {
			t.Errorf("serve: %v\n%s", err, errOut)
		}
	})
	t.Run("records prints one JSON line per request", func(t *testing.T) {
		out, _, err := invoke(t, url, "records", "--kind", "requests", "--intent", "intent-cli")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("records: %q", out)
		}
		var second provider.RequestRecord
		if err := json.Unmarshal([]byte(lines[1]), &second); err != nil || second.Outcome != provider.OutcomeReplayed || second.Seq != 2 {
			t.Errorf("second record %+v, %v", second, err)
		}
	})
	t.Run("records --after and --limit select a page", func(t *testing.T) {
		out, _, err := invoke(t, url, "records", "--kind", "requests", "--after", "1", "--limit", "1")
		if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"seq":2`) {
			t.Errorf("records: %q, %v", out, err)
		}
	})
	t.Run("delete deletes the task, keeps its key, and a resend is replayed with the deleted mark", func(t *testing.T) {
		out, _, err := invoke(t, url, "delete", "--intent", "intent-cli")
		if err != nil || !strings.Contains(out, "deleted fake-task-0001 (scope default, intent intent-cli); its key stays") ||
			!strings.Contains(out, "tasks existing 0") {
			t.Fatalf("delete: %q, %v", out, err)
		}
		resp, err := client.Create(context.Background(), req)
		if err != nil || resp.Outcome != provider.OutcomeReplayed || resp.TaskID != "fake-task-0001" || !resp.TaskDeleted ||
			resp.Counts.CreatesExecuted != 1 {
			t.Errorf("resend after the delete: %+v, %v", resp, err)
		}
		_, _, err = invoke(t, url, "delete", "--task-id", "fake-task-0001")
		if se, ok := errors.AsType[*provider.ServiceError](err); !ok || se.Code != provider.CodeConflict {
			t.Errorf("second delete: %v; want a 409", err)
		}
		out, _, err = invoke(t, url, "records", "--kind", "deletes", "--scope", "default")
		if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"task_id":"fake-task-0001"`) {
			t.Errorf("records --kind deletes: %q, %v", out, err)
		}
	})
	t.Run("fault arms the switch and the next reply is withheld", func(t *testing.T) {
		out, _, err := invoke(t, url, "fault", "--drop-replies", "1")
		if err != nil || !strings.Contains(out, "next 1 create replies") {
			t.Fatalf("fault: %q, %v", out, err)
		}
		_, err = client.Create(context.Background(), req)
		if !provider.IsTransient(err) {
			t.Errorf("create after arming: %v, want a timeout", err)
		}
		if !strings.Contains(serveLog.String(), "reply withheld") {
			t.Errorf("serve log does not mention the withheld reply:\n%s", serveLog.String())
		}
	})

	stopServe()
	t.Run("after shutdown the data directory holds the counters", func(t *testing.T) {
		st, err := provider.Open(dir, provider.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if got, want := st.Stats(), (provider.Counts{RequestsReceived: 4, CreatesExecuted: 1, TasksExisting: 0}); got != want {
			t.Errorf("counts %+v, want %+v", got, want)
		}
	})
	t.Run("the serve log is JSON and warns that faults are allowed", func(t *testing.T) {
		log := serveLog.String()
		first, _, _ := strings.Cut(log, "\n")
		if !json.Valid([]byte(first)) || !strings.Contains(log, `"level":"WARN"`) || !strings.Contains(log, "FAULTS ALLOWED") {
			t.Errorf("serve log:\n%s", log)
		}
	})
}

func TestRecordsWithoutAServerFails(t *testing.T) {
	_, _, err := invoke(t, "nats://127.0.0.1:1", "records", "--kind", "tasks")
	if err == nil || errors.Is(err, errUsage) {
		t.Errorf("error %v, want a connection failure", err)
	}
}

// hostService serves the store in dir on the server at url in this process
// until stopped.
func hostService(t *testing.T, url, dir string) *provider.Hosted {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	h, err := provider.Host(dir, provider.Options{Logger: quiet}, provider.ServiceConfig{Logger: quiet},
		func() (*nats.Conn, error) { return nats.Connect(url) })
	if err != nil {
		t.Fatalf("serving %s: %v", dir, err)
	}
	return h
}

// adoptionRecord reads the adoption record's value and revision.
func adoptionRecord(t *testing.T, url string) (string, uint64) {
	t.Helper()
	nc, js := testenv.Connect(t, url)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, provider.AdoptionBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, provider.AdoptionKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value()), e.Revision()
}

func TestAdoptReplacesTheStoreOnlyWhenTold(t *testing.T) {
	url := startNATS(t)
	dirA, dirB := t.TempDir(), filepath.Join(t.TempDir(), "new-store")
	h := hostService(t, url, dirA)
	idA := h.Store.ID()
	nc, _ := testenv.Connect(t, url)
	client := provider.NewClient(nc)
	req := request("intent-0001", "check items")
	if resp, err := client.Create(context.Background(), req); err != nil || resp.Outcome != provider.OutcomeCreated {
		t.Fatalf("create: %+v, %v", resp, err)
	}

	t.Run("adopt is refused while the adopted store serves", func(t *testing.T) {
		_, _, err := invoke(t, url, "adopt", "--data", dirB, "--replace", idA)
		if !errors.Is(err, provider.ErrAdoptRefused) || !strings.Contains(err.Error(), "answers a micro PING") {
			t.Errorf("adopt: %v", err)
		}
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Run("serve on another store is refused, naming the adopted one and the command that would replace it", func(t *testing.T) {
		_, _, err := invoke(t, url, "serve", "--data", dirB)
		for _, want := range []string{idA, "data directory " + dirA, "provider adopt --data " + dirB + " --replace " + idA} {
			if !errors.Is(err, provider.ErrNotAdopted) || !strings.Contains(err.Error(), want) {
				t.Errorf("serve: %v; want ErrNotAdopted saying %q", err, want)
			}
		}
	})
	before, rev := adoptionRecord(t, url)
	refusals := []struct {
		name string
		args []string
		want []string
	}{
		{"adopt without naming the replaced store is refused, naming it", []string{"adopt", "--data", dirB},
			[]string{"name the adopted store with --replace", idA, dirA}},
		{"adopt naming a store that is not the adopted one is refused, naming the adopted one", []string{"adopt", "--data", dirB, "--replace", "store-00000000000000ff"},
			[]string{"store-00000000000000ff is not the adopted store", idA}},
	}
	for _, tc := range refusals {
		t.Run(tc.name+", and changes nothing", func(t *testing.T) {
			out, _, err := invoke(t, url, tc.args...)
			if !errors.Is(err, provider.ErrAdoptRefused) || out != "" {
				t.Fatalf("adopt: %q, %v; want a refusal", out, err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
			if after, again := adoptionRecord(t, url); after != before || again != rev {
				t.Errorf("record %s (revision %d), want %s (revision %d)", after, again, before, rev)
			}
		})
	}
	t.Run("a usage error opens no store", func(t *testing.T) {
		fresh := filepath.Join(t.TempDir(), "never")
		if _, _, err := invoke(t, url, "adopt", "--data", fresh, "--replace", "A"); !errors.Is(err, errUsage) {
			t.Fatalf("adopt: %v, want a usage error", err)
		}
		if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v; want it never made", fresh, err)
		}
	})

	var idB string
	t.Run("adopt naming the adopted store adopts the new one and says plainly what that costs", func(t *testing.T) {
		out, _, err := invoke(t, url, "adopt", "--data", dirB, "--replace", idA)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"replacing " + idA, "DANGER", "created again", idA + " is now refused",
			"tasks existing 0", "Next: provider serve --data " + dirB} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not say %q:\n%s", want, out)
			}
		}
		rec, _ := adoptionRecord(t, url)
		var a provider.Adoption
		if err := json.Unmarshal([]byte(rec), &a); err != nil || a.Replaces != idA || a.Path != dirB || a.How != provider.AdoptedByOperator {
			t.Fatalf("record %s: %v", rec, err)
		}
		idB = a.StoreID
		if !strings.HasPrefix(out, "adopted "+idB+" ("+dirB+")") {
			t.Errorf("output does not name %s first:\n%s", idB, out)
		}
	})
	t.Run("then the new store serves, and the old one is refused", func(t *testing.T) {
		hb := hostService(t, url, dirB)
		defer func() { _ = hb.Stop() }()
		if hb.Store.ID() != idB {
			t.Errorf("serving %s, adopted %s", hb.Store.ID(), idB)
		}
		info, err := client.Info(context.Background())
		if err != nil || info.StoreID != idB {
			t.Errorf("info %+v, %v; want store %s", info, err, idB)
		}
		if err := hb.Stop(); err != nil {
			t.Fatal(err)
		}
		_, _, err = invoke(t, url, "serve", "--data", dirA)
		if !errors.Is(err, provider.ErrNotAdopted) || !strings.Contains(err.Error(), idB) {
			t.Errorf("serve on the replaced store: %v", err)
		}
	})
	t.Run("adopt of the adopted store again changes nothing", func(t *testing.T) {
		_, rev := adoptionRecord(t, url)
		out, _, err := invoke(t, url, "adopt", "--data", dirB, "--replace", idA)
		if err != nil || !strings.HasPrefix(out, "nothing changed: "+idB+" is already the adopted store") {
			t.Errorf("adopt: %q, %v", out, err)
		}
		if _, again := adoptionRecord(t, url); again != rev {
			t.Errorf("revision %d, want %d", again, rev)
		}
	})
}

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

func TestVersionPrintsTheModuleVersionAndSucceeds(t *testing.T) {
	var out, errb bytes.Buffer
	if err := newApp(&out, &errb, func(string) string { return "" }).run(context.Background(), []string{"--version"}); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "provider ") || len(strings.TrimSpace(out.String())) <= len("provider") {
		t.Fatalf("printed %q", out.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metricLines returns the sample lines of a /metrics body that start with
// prefix.
func metricLines(body, prefix string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func TestServeHTTPShowsTheThreeCountersAndHealth(t *testing.T) {
	url := startNATS(t)
	dir := t.TempDir()
	addr := freeAddr(t)

	serveLog, stopServe := startServe(t, "serve", "--server", url, "--data", dir, "--http", addr)
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _, err := proctest.Get(base + "/readyz"); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not become ready; log:\n%s", serveLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body, err := proctest.Get(base + "/readyz?verbose"); err != nil || code != 200 ||
		body != "[+]nats ok\n[+]service ok\n[+]store ok\nok\n" {
		t.Errorf("/readyz?verbose: %d %q %v", code, body, err)
	}
	if code, body, err := proctest.Get(base + "/healthz"); err != nil || code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q %v", code, body, err)
	}

	nc, _ := testenv.Connect(t, url)
	client := provider.NewClient(nc)
	req := request("intent-metrics", "check items")
	for _, want := range []string{provider.OutcomeCreated, provider.OutcomeReplayed} {
		resp, err := client.Create(context.Background(), req)
		if err != nil || resp.Outcome != want {
			t.Fatalf("create: %+v, %v; want %s", resp, err, want)
		}
	}

	code, body, err := proctest.Get(base + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	got := strings.Join(metricLines(body, "sendtwice_"), "\n")
	want := "sendtwice_creates_executed 1\nsendtwice_keys_compacted 0\nsendtwice_keys_live 1\nsendtwice_requests_received 2\n" +
		"sendtwice_scope_creates_executed{scope=\"default\"} 1\nsendtwice_scope_keys_live{scope=\"default\"} 1\n" +
		"sendtwice_scope_requests_received{scope=\"default\"} 2\nsendtwice_scope_tasks_existing{scope=\"default\"} 1\n" +
		"sendtwice_tasks_deleted 0\nsendtwice_tasks_existing 1"
	if got != want {
		t.Errorf("service metrics:\n%s\nwant:\n%s", got, want)
	}
	for _, typ := range []string{"# TYPE sendtwice_requests_received gauge", "# TYPE sendtwice_creates_executed gauge", "# TYPE sendtwice_tasks_existing gauge"} {
		if !strings.Contains(body, typ) {
			t.Errorf("/metrics lacks %q", typ)
		}
	}
	if len(metricLines(body, "go_goroutines")) != 1 || len(metricLines(body, "process_start_time_seconds")) != 1 {
		t.Error("/metrics lacks the Go runtime and process metrics")
	}

	stopServe()
	if _, _, err := proctest.Get(base + "/healthz"); err == nil {
		t.Error("the HTTP server still answers after serve returned")
	}
}

func TestServeHTTPRefusesAnAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, _, err = invoke(t, "nats://127.0.0.1:1", "serve", "--data", t.TempDir(), "--http", l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "listening on") {
		t.Errorf("serve with its HTTP address taken: %v", err)
	}
}
