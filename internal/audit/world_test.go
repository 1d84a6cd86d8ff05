package audit_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/keylife"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// world builds an audit.Input the way the pipeline leaves it: messages
// stored in the stream, executors calling the service and storing receipts,
// the service recording every request. Each case then breaks it in one way.
type world struct {
	t     *testing.T
	in    *audit.Input
	now   time.Time
	seed  *scenario.Seed
	first map[string]provider.FirstResult
}

var auditedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// auditedStore is the store id the synthetic task service answers with.
const auditedStore = "store-0123456789abcdef"

func newWorld(t *testing.T) *world {
	t.Helper()
	s := testenv.Seed(t)
	return &world{t: t, now: auditedAt, seed: s, first: map[string]provider.FirstResult{}, in: &audit.Input{
		Messages:    map[uint64]document.Identity{},
		Approvals:   map[uint64]audit.Message{},
		Receipts:    map[uint64][]*document.Receipt{},
		DeadLetters: map[uint64]string{},
		Stream:      audit.StreamState{FirstSeq: 1, MaxAge: 7 * 24 * time.Hour},
		MaxDeliver:  4,
		Now:         auditedAt,
		Service:     audit.ServiceIdentity{StoreID: auditedStore},
		Topology:    asProvisioned(topology.Config{MaxDeliver: 4}),
		Ledger:      &audit.LedgerRead{},
	}}
}

// asProvisioned is a topology provisioned with c and unchanged since.
func asProvisioned(c topology.Config) *audit.Topology {
	p := topology.Intended(c)
	p.Recorded, p.At = true, auditedAt.Add(-30*24*time.Hour)
	t := &audit.Topology{Provisioned: &p, Streams: map[string]*jetstream.StreamConfig{}}
	for name, sc := range p.Streams {
		sc.Subjects = slices.Clone(sc.Subjects)
		t.Streams[name] = &sc
	}
	cc := p.Consumer
	cc.Metadata = maps.Clone(cc.Metadata)
	t.Consumer = &cc
	return t
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// publish stores data as the stream's next message, at time at.
func (w *world) publish(data []byte, at time.Time) uint64 {
	st := &w.in.Stream
	st.LastSeq++
	st.LastSeqAfter = st.LastSeq
	st.Msgs++
	w.in.Messages[st.LastSeq] = document.Identify(data)
	w.in.Approvals[st.LastSeq] = audit.Message{Data: data, Stored: at}
	return st.LastSeq
}

// serve is the task service: it records the request and creates a task on
// an intent id's first call.
func (w *world) serve(req provider.CreateRequest, at time.Time) provider.RequestRecord {
	in := w.in
	rec := provider.RequestRecord{Seq: uint64(len(in.Requests) + 1), Scope: req.Scope, IntentID: req.IntentID, RequestDigest: req.RequestDigest,
		RequestID: req.RequestID, ReceivedAt: stamp(at), CallRef: req.CallRef, NotAfter: req.NotAfter}
	k := keyName(req.Scope, req.IntentID)
	f, seen := w.first[k]
	switch {
	case !seen:
		in.Counts.CreatesExecuted++
		in.Counts.TasksExisting++
		in.Keys.Live++
		task := fmt.Sprintf("fake-task-%04d", in.Counts.CreatesExecuted)
		f = provider.FirstResult{Scope: req.Scope, IntentID: req.IntentID, RequestDigest: req.RequestDigest, RequestID: req.RequestID, TaskID: task, CreatedAt: stamp(at), RequestSeq: rec.Seq}
		w.first[k] = f
		in.Intents = append(in.Intents, f)
		in.Creates = append(in.Creates, provider.CreateRecord{Seq: uint64(len(in.Creates) + 1), Scope: req.Scope, IntentID: req.IntentID, RequestDigest: req.RequestDigest, TaskID: task, RequestSeq: rec.Seq, CreatedAt: stamp(at)})
		in.Tasks = append(in.Tasks, provider.TaskRecord{Seq: uint64(len(in.Tasks) + 1), TaskID: task, Scope: req.Scope, IntentID: req.IntentID, Task: req.Task, CreatedAt: stamp(at)})
		rec.Outcome = provider.OutcomeCreated
	case f.RequestDigest == req.RequestDigest:
		rec.Outcome = provider.OutcomeReplayed
		rec.TaskDeleted = f.TaskDeleted
	default:
		rec.Outcome = provider.OutcomeConflict
		rec.TaskDeleted = f.TaskDeleted
	}
	rec.TaskID = f.TaskID
	in.Counts.RequestsReceived++
	in.Requests = append(in.Requests, rec)
	return rec
}

// keyName names a key (scope, intent id) in the world's map; no scope is
// the default scope.
func keyName(scope, intent string) string {
	if scope == "" {
		scope = document.DefaultScope
	}
	return scope + "/" + intent
}

// call is one delivery of message seq calling the service, as the executor
// does after the gate; no receipt is stored.
func (w *world) call(seq, delivered uint64, attempt string, at time.Time) provider.RequestRecord {
	w.t.Helper()
	v, err := gate.CheckBindings(w.in.Approvals[seq].Data)
	if err != nil {
		w.t.Fatalf("message %d does not pass the gate: %v", seq, err)
	}
	notAfter := ""
	if d := keylife.Deadline(v.NotAfter, w.in.Stream.MaxAge); !d.IsZero() {
		notAfter = stamp(d)
	}
	return w.serve(provider.CreateRequest{Scope: v.Request.KeyScope(), IntentID: v.Request.IntentID, RequestDigest: v.RequestDigest, RequestID: v.Request.RequestID,
		Task: taskOf(v), CallRef: topology.CallRef(seq, delivered, attempt), NotAfter: notAfter}, at)
}

// taskOf is the task of a request that passed the gate, as a call carries it.
func taskOf(v *gate.Verdict) provider.Task {
	q := v.Request.Task
	return provider.Task{Title: q.Title, AssigneePersonRef: q.AssigneePersonRef, DueAt: q.DueAt}
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// receipt stores the receipt of one delivery of message seq: for the
// service's reply rec when outcome is the service's, else without one.
func (w *world) receipt(seq, delivered uint64, attempt, outcome string, rec *provider.RequestRecord, at time.Time) *document.Receipt {
	id := w.in.Messages[seq]
	r := &document.Receipt{SchemaVersion: document.ReceiptVersion, ReceiptID: "receipt-" + attempt, Outcome: outcome,
		IntentID: ptr(id.IntentID), RequestID: ptr(id.RequestID), ApprovalID: ptr(id.ApprovalID),
		Delivery: document.Delivery{StreamSeq: seq, Delivered: delivered, Attempt: attempt, Executor: "exec-1",
			StoredAt: stamp(w.in.Approvals[seq].Stored)}, IssuedAt: stamp(at)}
	if rec != nil {
		r.Scope = rec.Scope
		r.TaskDeleted = rec.TaskDeleted && rec.Outcome == provider.OutcomeReplayed
		r.IntentID = ptr(rec.IntentID)
		r.TaskID = ptr(rec.TaskID)
		r.StoreID = ptr(auditedStore)
		r.Counts = &document.Counts{RequestsReceived: w.in.Counts.RequestsReceived, CreatesExecuted: w.in.Counts.CreatesExecuted, TasksExisting: w.in.Counts.TasksExisting}
	}
	w.in.Receipts[seq] = append(w.in.Receipts[seq], r)
	return r
}

// handle is one ordinary delivery: the call, then its receipt.
func (w *world) handle(seq, delivered uint64, at time.Time) {
	attempt := fmt.Sprintf("a%d-%d", seq, delivered)
	rec := w.call(seq, delivered, attempt, at)
	w.receipt(seq, delivered, attempt, rec.Outcome, &rec, at.Add(time.Millisecond))
}

// run is a correct history: a create, a resend (replayed), a changed
// request (conflict), a new intent whose first reply was lost and which
// was replayed on its second delivery, and a tampered message rejected.
func (w *world) run(at time.Time) {
	s := w.seed
	w.handle(w.publish(s.Original.Envelope(), at), 1, at)
	w.handle(w.publish(s.Original.Envelope(), at), 1, at.Add(time.Second))
	w.handle(w.publish(s.Changed.Envelope(), at), 1, at.Add(2*time.Second))
	seq := w.publish(s.NewIntent.Envelope(), at)
	lost := w.call(seq, 1, "lost", at.Add(3*time.Second))
	w.in.Requests[lost.Seq-1].ReplyDropped = true
	w.handle(seq, 2, at.Add(4*time.Second))
	tampered := s.TamperedCases()[2] // candidate-changed
	seq = w.publish(tampered.Envelope, at)
	w.receipt(seq, 1, "rejected", document.OutcomeRejected, nil, at.Add(5*time.Second))
}

// purge empties the stream as a purge (or ageing) does.
func (w *world) purge() {
	w.in.Messages = map[uint64]document.Identity{}
	w.in.Approvals = map[uint64]audit.Message{}
	w.in.Stream.FirstSeq = w.in.Stream.LastSeq + 1
	w.in.Stream.Msgs = 0
}

// failing lists the names of the checks that failed, of a report of
// Verify or of VerifyRun.
func failing(checks []audit.Check) []string {
	var out []string
	for _, c := range checks {
		if !c.OK {
			out = append(out, c.ID)
			seenFailing.Store(c.ID, true)
		}
	}
	return out
}

// expectFailing fails the test unless the checks that fail in rep are
// exactly those numbered fail.
func expectFailing(t *testing.T, rep audit.Report, fail []string) {
	t.Helper()
	if got := failing(rep.Checks); !slices.Equal(got, fail) {
		t.Fatalf("failing checks %v, want %v:\n%s", got, fail, violations(rep))
	}
}

// violations lists the report's violations, each after its check's number.
func violations(rep audit.Report) string {
	var b strings.Builder
	for _, c := range rep.Checks {
		for _, v := range c.Violations {
			fmt.Fprintf(&b, "%s: %s\n", c.ID, v)
		}
	}
	return b.String()
}
