package provider

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"regexp"
	"testing"
	"time"
)

func sampleReplies(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range []CreateResponse{
		{Outcome: OutcomeCreated, TaskID: "fake-task-0001",
			First: FirstResult{IntentID: "intent-0001", RequestDigest: "sha256:" + "ab12", RequestID: "task-request-0001",
				TaskID: "fake-task-0001", CreatedAt: "2026-12-01T02:41:45.123456789Z", RequestSeq: 1},
			Counts: Counts{RequestsReceived: 1, CreatesExecuted: 1, TasksExisting: 1}, RequestSeq: 1, StoreID: "store-d7df2d8f3631b336"},
		{Outcome: OutcomeConflict, TaskID: "fake-task-123456",
			First:  FirstResult{IntentID: "intent-x", RequestDigest: "sha256:00", TaskID: "fake-task-123456", CreatedAt: "t", RequestSeq: 999999999999999999},
			Counts: Counts{RequestsReceived: 0, CreatesExecuted: 10, TasksExisting: 100}, RequestSeq: 0},
		{Outcome: OutcomeReplayed, First: FirstResult{IntentID: "intent-é\"<>", RequestSeq: 1 << 62},
			Counts: Counts{RequestsReceived: -1}},
		{},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// The service's own replies are read by the scanner, and to the same value
// encoding/json reads.
func TestCreateRepliesInTheServiceLayoutAreScanned(t *testing.T) {
	for i, b := range sampleReplies(t) {
		var scanned, std CreateResponse
		ok := scanCreateResponse(b, &scanned)
		if err := json.Unmarshal(b, &std); err != nil {
			t.Fatal(err)
		}
		// The third reply holds non-ASCII and escaped text and a negative
		// count: encoding/json reads it.
		if want := i != 2; ok != want {
			t.Fatalf("reply %d %s: scanned %t, want %t", i, b, ok, want)
		}
		var got CreateResponse
		if err := decodeCreateResponse(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, std) || (ok && !reflect.DeepEqual(scanned, std)) {
			t.Fatalf("reply %s: decoded %+v, encoding/json %+v", b, got, std)
		}
	}
	var got CreateResponse
	if err := decodeCreateResponse([]byte(`{"outcome":`), &got); err == nil {
		t.Fatal("a cut reply decoded")
	}
}

// FuzzCreateReply checks that whatever the scanner reads, encoding/json
// reads to the same value, and that decodeCreateResponse answers as
// encoding/json does.
func FuzzCreateReply(f *testing.F) {
	for _, b := range sampleReplies(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"outcome":"created","task_id":"a","first":{"intent_id":"i","request_digest":"d","task_id":"a","created_at":"c","request_seq":01},"counts":{"requests_received":1,"creates_executed":1,"tasks_existing":1},"request_seq":1,"store_id":"s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var scanned, std, got CreateResponse
		ok := scanCreateResponse(data, &scanned)
		stdErr := json.Unmarshal(data, &std)
		if ok && (stdErr != nil || !reflect.DeepEqual(scanned, std)) {
			t.Fatalf("scanned %q to %+v; encoding/json: %+v, %v", data, scanned, std, stdErr)
		}
		err := decodeCreateResponse(data, &got)
		if (err == nil) != (stdErr == nil) || (err == nil && !reflect.DeepEqual(got, std)) {
			t.Fatalf("decoded %q to %+v, %v; encoding/json: %+v, %v", data, got, err, std, stdErr)
		}
	})
}

// BenchmarkDecodeCreateReply reads one reply of the service as the
// executor's client does, and with encoding/json alone.
func BenchmarkDecodeCreateReply(b *testing.B) {
	reply := sampleReplies(b)[0]
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r CreateResponse
			if err := decodeCreateResponse(reply, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r CreateResponse
			if err := json.Unmarshal(reply, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The service logs each create call at the level its outcome deserves: a
// reply withheld by the fault switch as a warning, an idempotency conflict
// at info, created and replayed at debug only.
func TestACreateCallIsLoggedAtTheLevelOfItsOutcome(t *testing.T) {
	logs := &logBuffer{}
	h := newHarness(t, Options{}, ServiceConfig{AllowFaults: true,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	ctx := ctxT(t)
	for _, req := range []CreateRequest{newRequest("intent-log", "first"), newRequest("intent-log", "first"), newRequest("intent-log", "other")} {
		if _, err := h.client.Create(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.client.ArmFault(ctx, 1); err != nil {
		t.Fatal(err)
	}
	impatient := &Client{nc: h.nc, Timeout: 300 * time.Millisecond}
	if _, err := impatient.Create(ctx, newRequest("intent-dropped", "lost reply")); err == nil {
		t.Fatal("the reply the fault switch withholds arrived")
	}
	for _, tc := range []struct {
		line   string
		logged bool
	}{
		{`level=INFO msg="create call" .* intent_id=intent-log outcome=idempotency_conflict`, true},
		{`level=WARN msg="fault switch: reply withheld after commit" .* intent_id=intent-dropped outcome=created`, true},
		{`msg="create call" .* outcome=created`, false},
		{`msg="create call" .* outcome=replayed`, false},
	} {
		if got := logs.String(); regexp.MustCompile(`(?m)^.*`+tc.line).MatchString(got) != tc.logged {
			t.Errorf("the log holds %q: %v, want %v; the log:\n%s", tc.line, !tc.logged, tc.logged, got)
		}
	}
}
