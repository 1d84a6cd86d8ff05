package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
		{"a stray argument is a usage error", []string{"stats", "extra"}, errUsage, "", ""},
		{"delete without a task is a usage error", []string{"delete"}, errUsage, "", ""},
		{"delete naming a task id and a key is a usage error", []string{"delete", "--task-id", "fake-task-0001", "--intent", "i"}, errUsage, "", ""},
		{"delete with a bad scope is a usage error", []string{"delete", "--intent", "i", "--scope", "A"}, errUsage, "", ""},
		{"serve with a negative key margin is a usage error", []string{"serve", "--data", "x", "--key-margin", "-1s"}, errUsage, "", ""},
		{"an unknown log format is a usage error", []string{"stats", "--log-format", "xml"}, errUsage, "", ""},
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

func TestServeStatsRecordsFault(t *testing.T) {
	url := startNATS(t)
	dir := t.TempDir()

	serveLog, stopServe := startServe(t, "serve", "--server", url, "--data", dir, "--allow-faults", "--log-format", "json")

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
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
	t.Run("stats prints the counters and the store readably", func(t *testing.T) {
		out, _, err := invoke(t, url, "stats")
		want := "requests received 2, creates executed 1, tasks existing 1\n" +
			"store " + info.StoreID + ", answered by instance " + info.Instance + " on host " + info.Host + ", pid " + strconv.Itoa(info.PID) + "\n" +
			"keys live 1, keys compacted 0, tasks deleted 0, records retired 0\n" +
			"scope default: requests received 2, creates executed 1, tasks existing 1, keys live 1, keys compacted 0, tasks deleted 0\n"
		if err != nil || out != want {
			t.Errorf("stats: %q, %v; want %q", out, err, want)
		}
	})
	t.Run("stats --json prints the counters and the store as JSON", func(t *testing.T) {
		out, _, err := invoke(t, url, "stats", "--json")
		if err != nil || !strings.HasPrefix(out, `{"requests_received":2,"creates_executed":1,"tasks_existing":1,"store_id":"`+info.StoreID+`",`) {
			t.Errorf("stats --json: %q, %v", out, err)
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

func TestStatsWithoutAServerFails(t *testing.T) {
	_, _, err := invoke(t, "nats://127.0.0.1:1", "stats")
	if err == nil || errors.Is(err, errUsage) {
		t.Errorf("error %v, want a connection failure", err)
	}
}
