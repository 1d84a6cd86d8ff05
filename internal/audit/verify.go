package audit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Input is everything the checker reads: the approval messages, receipts and
// dead letters from JetStream, and the task service's counters and records.
type Input struct {
	Messages    map[uint64]document.Identity
	Receipts    map[uint64][]*document.Receipt
	DeadLetters map[uint64]string
	Counts      provider.Counts
	// Service is the task service instance that answered the audit, with
	// the id of its store.
	Service  ServiceIdentity
	Requests []provider.RequestRecord
	Creates  []provider.CreateRecord
	Tasks    []provider.TaskRecord
	Intents  []provider.FirstResult
	Consumer ConsumerState
	// Listing, when set, is all the audit knows of a task service that
	// keeps no call log and no counters (a CalDAV collection): the tasks it
	// holds. Counts and the records above are then empty, and the checks
	// that need them are reported as not applicable.
	Listing *TaskListing

	// Approvals holds each stored approval message's data and the time the
	// stream stored it, by stream sequence, for the gate to be re-run.
	Approvals map[uint64]Message
	// Stream is what the APPROVALS stream held when it was read.
	Stream StreamState
	// ReceiptsStored is, per approval message, when the RECEIPTS stream
	// stored its first receipt. Where it is missing, the receipts' own
	// issued_at stands in.
	ReceiptsStored map[uint64]time.Time
	// Undecodable lists the stored receipts that do not decode.
	Undecodable []Undecodable
	// Foreign lists the records of APPROVALS and DEADLETTERS that the
	// pipeline does not write: dead letters that do not decode, status
	// messages stored as approvals.
	Foreign []Undecodable
	// Topology is the streams' and the consumer's configuration as read,
	// with the record of what provisioning applied.
	Topology *Topology
	// MaxDeliver is the executors' delivery budget, from the shared
	// consumer as provisioned (0 or less: unbounded): deliveries beyond it
	// are dead-lettered without a call to the service.
	MaxDeliver int
	// Now is when the audit read its input; the zero time means time.Now.
	Now time.Time
}

// ServiceIdentity names the task service's store and the instance that
// answered the audit.
type ServiceIdentity struct {
	StoreID string `json:"store_id"`
	// Name names a listed service ("CalDAV collection https://…/").
	Name     string `json:"name,omitempty"`
	Instance string `json:"instance,omitempty"`
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
}

// Message is one stored approval message.
type Message struct {
	Data   []byte
	Stored time.Time
	// Subject is the subject the message was stored on; the gate's re-run
	// compares it with the envelope's intent. Empty skips that comparison.
	Subject string
}

// StreamState is the APPROVALS stream's state when Load read it.
type StreamState struct {
	FirstSeq  uint64
	LastSeq   uint64
	Msgs      uint64
	FirstTime time.Time
	// MaxAge is the stream's MaxAge as provisioned, never as the stream
	// says now (a lowered MaxAge must not excuse a purge); zero means
	// messages never age out.
	MaxAge time.Duration
	// MaxAgeFrom says where MaxAge was read ("as provisioned", or the
	// topology's default when there is no record of what was provisioned).
	MaxAgeFrom string
	// LastSeqAfter is the stream's last sequence once Load had read
	// everything else: records naming a message stored meanwhile are after
	// the window, not missing.
	LastSeqAfter uint64
}

// Load reads the Input over the connection nc, from the fake task service.
func Load(ctx context.Context, nc *nats.Conn) (*Input, error) { return LoadWith(ctx, nc, nil) }

// LoadWith reads the Input over the connection nc. With a lister, the task
// service is known by its listing only (Input.Listing); without one, the
// fake task service's counters and records are read over nc.
func LoadWith(ctx context.Context, nc *nats.Conn, lister TaskLister) (*Input, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	in := &Input{Messages: map[uint64]document.Identity{}, Approvals: map[uint64]Message{}, Now: time.Now()}
	if in.Topology, err = readTopology(ctx, js); err != nil {
		return nil, err
	}
	info, err := readStream(ctx, js, topology.ApprovalsStream, false, func(m jetstream.Msg) error {
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		if st := statusMessage(m); st != "" {
			in.Foreign = append(in.Foreign, Undecodable{Stream: topology.ApprovalsStream, Seq: meta.Sequence.Stream, Err: st})
		}
		in.Messages[meta.Sequence.Stream] = document.Identify(m.Data())
		in.Approvals[meta.Sequence.Stream] = Message{Data: m.Data(), Stored: meta.Timestamp, Subject: m.Subject()}
		return nil
	})
	if err != nil {
		return nil, err
	}
	provisioned := in.Topology.provisioned()
	in.Stream = StreamState{FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Msgs: info.State.Msgs,
		FirstTime: info.State.FirstTime, MaxAge: provisioned.Streams[topology.ApprovalsStream].MaxAge, MaxAgeFrom: in.Topology.source(),
		LastSeqAfter: info.State.LastSeq}
	if in.Receipts, in.ReceiptsStored, in.Undecodable, err = readReceipts(ctx, js); err != nil {
		return nil, err
	}
	var badDead []Undecodable
	if in.DeadLetters, badDead, err = ReadDeadLetters(ctx, js); err != nil {
		return nil, err
	}
	in.Foreign = append(in.Foreign, badDead...)
	var cc jetstream.ConsumerConfig
	if in.Consumer, cc, err = consumer(ctx, js); err != nil {
		return nil, err
	}
	// The executors call the service on deliveries up to their budget and
	// dead-letter later ones without a call: the budget as provisioned,
	// without a record the consumer's own.
	if in.Topology.Provisioned != nil {
		cc = in.Topology.Provisioned.Consumer
	}
	in.MaxDeliver = topology.CallBound(cc)
	if lister != nil {
		l, err := lister.ListTasks(ctx)
		if err != nil {
			return nil, fmt.Errorf("audit: listing the task service's tasks: %w", err)
		}
		in.Listing = &l
		in.Service = ServiceIdentity{StoreID: l.StoreID, Name: l.Name}
		return in, finishLoad(ctx, js, in)
	}
	svc := provider.NewClient(nc)
	si, err := svc.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the task service's counters: %w", err)
	}
	in.Counts = si.Counts
	in.Service = ServiceIdentity{StoreID: si.StoreID, Instance: si.Instance, Host: si.Host, PID: si.PID}
	for _, kind := range []string{provider.RecordRequests, provider.RecordCreates, provider.RecordTasks, provider.RecordIntents} {
		var after uint64
		for {
			page, err := svc.Records(ctx, provider.RecordsRequest{Kind: kind, AfterSeq: after, Limit: provider.MaxRecordsLimit})
			if err != nil {
				return nil, fmt.Errorf("audit: reading the task service's %s: %w", kind, err)
			}
			in.Requests = append(in.Requests, page.Requests...)
			in.Creates = append(in.Creates, page.Creates...)
			in.Tasks = append(in.Tasks, page.Tasks...)
			in.Intents = append(in.Intents, page.Intents...)
			if page.NextSeq == 0 || page.NextSeq == after {
				break
			}
			after = page.NextSeq
		}
	}
	return in, finishLoad(ctx, js, in)
}

// finishLoad notes the APPROVALS stream's last sequence once everything
// else was read.
func finishLoad(ctx context.Context, js jetstream.JetStream, in *Input) error {
	s, err := js.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		return fmt.Errorf("audit: opening stream %s: %w", topology.ApprovalsStream, err)
	}
	end, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("audit: reading stream %s: %w", topology.ApprovalsStream, err)
	}
	in.Stream.LastSeqAfter = max(in.Stream.LastSeq, end.State.LastSeq)
	return nil
}

// Figure is one named number a check reports.
type Figure struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Check is the result of one of the checker's rules.
type Check struct {
	N          int      `json:"n"`
	Name       string   `json:"name"`
	OK         bool     `json:"ok"`
	Figures    []Figure `json:"figures"`
	Violations []string `json:"violations,omitempty"`
	// Notes list what a check found worth saying that is not a violation.
	Notes []string `json:"notes,omitempty"`
	// NotApplicable, when set, says why the check could not be made on
	// this task service (OK is then true: nothing was found, because
	// nothing could be looked at).
	NotApplicable string `json:"not_applicable,omitempty"`
}

// Report is the checker's verdict.
type Report struct {
	OK bool `json:"ok"`
	// Window is the part of the history the checks could see.
	Window Window `json:"window"`
	// Gate says which gate checks were re-run on the messages.
	Gate GateRun `json:"gate"`
	// Service is the task service instance and store that were audited.
	Service ServiceIdentity `json:"service"`
	Checks  []Check         `json:"checks"`
}

// maxListed bounds the violations listed per check.
const maxListed = 20

func (c *Check) fig(name string, v int) { c.Figures = append(c.Figures, Figure{name, int64(v)}) }

func (c *Check) violate(format string, args ...any) {
	c.OK = false
	if len(c.Violations) < maxListed {
		c.Violations = append(c.Violations, fmt.Sprintf(format, args...))
	} else if len(c.Violations) == maxListed {
		c.Violations = append(c.Violations, "… (more not listed)")
	}
}

// callSeq reads the stream sequence and the delivery number out of an
// executor's call reference, "APPROVALS:<stream_seq>:<delivery>:<attempt>".
func callSeq(ref string) (seq, delivered uint64, ok bool) {
	parts := strings.Split(ref, ":")
	if len(parts) != 4 || parts[0] != topology.ApprovalsStream || parts[3] == "" {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(parts[1], 10, 64)
	d, err2 := strconv.ParseUint(parts[2], 10, 64)
	return s, d, err1 == nil && err2 == nil
}

func serviceOutcome(o string) bool {
	return o == document.OutcomeCreated || o == document.OutcomeReplayed || o == document.OutcomeConflict
}

// Options are the checker's settings.
type Options struct {
	// Gate is re-run on every stored message, with expiry judged at the time
	// the stream stored it. nil runs the checks that need no keys
	// (envelope, approval_format, candidate_binding, request_binding,
	// capability) on signed and unsigned approvals alike; signature and
	// expiry need a Checker with the trusted approvers' keys.
	Gate *gate.Checker
	// AllowExternal is how many task service calls from outside the
	// executors (without a call reference naming an APPROVALS delivery) are
	// accepted.
	AllowExternal int
	// AllowRepeatedDeliveries is how many calls on a delivery number that
	// already made a call are accepted: a NATS server that loses consumer
	// state (a crash before its state was flushed, a leader change) numbers
	// a delivery again.
	AllowRepeatedDeliveries int
}

// recheck re-runs the gate on one stored message: the full check with the
// Gate, else the checks that need no keys.
func (o Options) recheck(subject string, envelope []byte, stored time.Time) (*gate.Verdict, error) {
	if o.Gate == nil {
		return gate.CheckDeliveryBindings(subject, envelope)
	}
	return o.Gate.CheckDelivery(subject, envelope, stored)
}

// Verify applies the rules to in with the default Options: no external
// calls, no repeated delivery numbers, the gate's checks that need no keys.
func Verify(in *Input) Report { return VerifyWith(in, Options{}) }

// VerifyWith applies the rules to in.
func VerifyWith(in *Input, o Options) Report {
	v := newView(in, o)
	if in.Listing != nil {
		return report(in, v, o, verifyListed(in, v))
	}
	return report(in, v, o, []Check{
		checkTerminal(in),
		checkOneCreate(in),
		checkCounters(in),
		checkRequests(v),
		checkFirstRecords(in),
		checkRejected(in),
		checkCallsNameMessages(v),
		checkReceiptsNameMessages(v),
		checkGate(v),
		checkDeliveries(v),
		checkOneStore(in),
		checkContent(v),
		checkProvisioned(in),
		checkForeign(in),
	})
}

func report(in *Input, v *view, o Options, checks []Check) Report {
	rep := Report{OK: true, Window: v.window(), Gate: describeGate(o.Gate), Service: in.Service, Checks: checks}
	for _, c := range checks {
		rep.OK = rep.OK && c.OK
	}
	return rep
}

func sortedSeqs[V any](m map[uint64]V) []uint64 {
	s := make([]uint64, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// 1. Every approval message has one terminal outcome: a terminal receipt or
// a dead letter, and never two that contradict each other (see
// contradiction).
func checkTerminal(in *Input) Check {
	c := Check{N: 1, Name: "every approval message has one terminal outcome: a terminal receipt or a dead letter, never two that contradict", OK: true}
	var withReceipt, dead, contradictory int
	for _, seq := range sortedSeqs(in.Messages) {
		terminal := false
		for _, r := range in.Receipts[seq] {
			terminal = terminal || document.Terminal(r.Outcome)
		}
		_, isDead := in.DeadLetters[seq]
		if terminal {
			withReceipt++
		}
		if isDead {
			dead++
		}
		if !terminal && !isDead {
			c.violate("message %d (intent %q) has neither a receipt nor a dead letter", seq, in.Messages[seq].IntentID)
		}
	}
	// Contradictions are looked for on every message with receipts or a
	// dead letter, held by the stream or not.
	seqs := map[uint64]bool{}
	for seq := range in.Receipts {
		seqs[seq] = true
	}
	for seq := range in.DeadLetters {
		seqs[seq] = true
	}
	for _, seq := range sortedSeqs(seqs) {
		_, isDead := in.DeadLetters[seq]
		if why := contradiction(in.Receipts[seq], isDead); why != "" {
			contradictory++
			c.violate("message %d has contradictory terminal outcomes: %s", seq, why)
		}
	}
	c.fig("messages", len(in.Messages))
	c.fig("with a terminal receipt", withReceipt)
	c.fig("dead-lettered", dead)
	c.fig("with contradictory terminal outcomes", contradictory)
	c.fig("consumer pending", int(in.Consumer.Pending))
	c.fig("consumer ack pending", in.Consumer.AckPending)
	return c
}

// contradiction says how a message's terminal outcomes contradict each
// other, or returns "". A message ends in one of four ways: the service
// answered that its task exists (created, or replayed on a later
// delivery), the service answered idempotency_conflict, the gate rejected
// it, or it was dead-lettered (a dead_lettered receipt, or a dead letter
// in DEADLETTERS). More than one of these for one message contradicts: a
// task the service created for a message then said to be of unknown
// outcome, a message both refused by the gate and sent. Several receipts
// of one way (replayed on each redelivery) do not.
func contradiction(rs []*document.Receipt, deadLetter bool) string {
	type way struct{ name, first string }
	var ways []way
	seen := map[string]bool{}
	add := func(name, first string) {
		if !seen[name] {
			seen[name] = true
			ways = append(ways, way{name, first})
		}
	}
	for _, r := range rs {
		what := fmt.Sprintf("%s (receipt %s, delivery %d)", r.Outcome, r.ReceiptID, r.Delivery.Delivered)
		switch r.Outcome {
		case document.OutcomeCreated, document.OutcomeReplayed:
			add("exists", what)
		case document.OutcomeConflict, document.OutcomeRejected, document.OutcomeDeadLettered:
			add(r.Outcome, what)
		}
	}
	if deadLetter {
		add(document.OutcomeDeadLettered, "a dead letter in "+topology.DeadLetterStream)
	}
	if len(ways) < 2 {
		return ""
	}
	parts := make([]string, len(ways))
	for i, w := range ways {
		parts[i] = w.first
	}
	return strings.Join(parts, " and ")
}

// 2. Per intent id at most one create, and every created/replayed receipt of
// that intent names the same task id.
func checkOneCreate(in *Input) Check {
	c := Check{N: 2, Name: "at most one create per intent id; its created and replayed receipts name one task", OK: true}
	creates := map[string]int{}
	for _, cr := range in.Creates {
		creates[cr.IntentID]++
	}
	var doubled []string
	for intent, n := range creates {
		if n > 1 {
			doubled = append(doubled, intent)
		}
	}
	slices.Sort(doubled)
	for _, intent := range doubled {
		c.violate("intent %q was created %d times", intent, creates[intent])
	}
	first := map[string]string{}
	for _, f := range in.Intents {
		first[f.IntentID] = f.TaskID
	}
	tasks := map[string]string{}
	var checked int
	for _, seq := range sortedSeqs(in.Receipts) {
		for _, r := range in.Receipts[seq] {
			if r.Outcome != document.OutcomeCreated && r.Outcome != document.OutcomeReplayed || r.IntentID == nil || r.TaskID == nil {
				continue
			}
			checked++
			intent, task := *r.IntentID, *r.TaskID
			if prev, ok := tasks[intent]; ok && prev != task {
				c.violate("intent %q: receipts name tasks %s and %s", intent, prev, task)
			}
			tasks[intent] = task
			if f, ok := first[intent]; ok && f != task {
				c.violate("intent %q: receipt of message %d names %s, the service's first result %s", intent, seq, task, f)
			}
		}
	}
	c.fig("intents with a create", len(creates))
	c.fig("doubled intents", len(doubled))
	c.fig("created and replayed receipts checked", checked)
	return c
}

// 3. creates executed == tasks existing == intents with a create.
func checkCounters(in *Input) Check {
	c := Check{N: 3, Name: "creates executed = tasks existing = intents with a create", OK: true}
	intents := map[string]bool{}
	for _, cr := range in.Creates {
		intents[cr.IntentID] = true
	}
	c.fig("creates executed", int(in.Counts.CreatesExecuted))
	c.fig("tasks existing", int(in.Counts.TasksExisting))
	c.fig("intents with a create", len(intents))
	c.fig("create records", len(in.Creates))
	c.fig("task records", len(in.Tasks))
	c.fig("intent records", len(in.Intents))
	n := in.Counts.CreatesExecuted
	if in.Counts.TasksExisting != n || int64(len(intents)) != n || int64(len(in.Creates)) != n ||
		int64(len(in.Tasks)) != n || int64(len(in.Intents)) != n {
		c.violate("creates executed %d, tasks existing %d, intents with a create %d, records %d/%d/%d differ",
			n, in.Counts.TasksExisting, len(intents), len(in.Creates), len(in.Tasks), len(in.Intents))
	}
	return c
}

// 4. Requests received equals the calls that reached the service: receipts
// from the service plus calls whose reply was lost, within in-flight work.
// Calls and receipts of messages outside the audited window (aged out before
// it, or stored while the audit read) and calls from outside the executors
// are counted apart and make up the rest of the equation.
func checkRequests(v *view) Check {
	in := v.in
	c := Check{N: 4, Name: "requests received = receipts from the service + calls whose reply was lost", OK: true}
	byRef := map[string]*provider.RequestRecord{}
	var external, before, after int
	for i := range in.Requests {
		r := &in.Requests[i]
		seq, _, ok := callSeq(r.CallRef)
		if !ok {
			external++
			continue
		}
		switch v.place(seq) {
		case beforeWindow:
			before++
			continue
		case afterWindow:
			after++
			continue
		}
		if _, dup := byRef[r.CallRef]; dup {
			c.violate("call %s reached the service twice", r.CallRef)
		}
		byRef[r.CallRef] = r
	}
	matched := map[string]bool{}
	var receipts int
	for _, seq := range sortedSeqs(in.Receipts) {
		if p := v.place(seq); p == beforeWindow || p == afterWindow {
			continue
		}
		for _, r := range in.Receipts[seq] {
			if !serviceOutcome(r.Outcome) {
				continue
			}
			receipts++
			ref := fmt.Sprintf("%s:%d:%d:%s", topology.ApprovalsStream, r.Delivery.StreamSeq, r.Delivery.Delivered, r.Delivery.Attempt)
			req, ok := byRef[ref]
			switch {
			case !ok:
				c.violate("receipt %s (%s) names a call the service never recorded", r.ReceiptID, r.Outcome)
			case req.Outcome != r.Outcome || req.TaskID != deref(r.TaskID):
				c.violate("receipt %s says %s %s; the service recorded %s %s", r.ReceiptID, r.Outcome, deref(r.TaskID), req.Outcome, req.TaskID)
			}
			matched[ref] = true
		}
	}
	var lost, dropped, finishedLater, inFlight int
	for ref, req := range byRef {
		if matched[ref] {
			continue
		}
		lost++
		seq, _, _ := callSeq(ref)
		finished := len(in.Receipts[seq]) > 0
		if _, dead := in.DeadLetters[seq]; dead {
			finished = true
		}
		switch {
		case req.ReplyDropped:
			dropped++
		case finished:
			finishedLater++
		default:
			inFlight++
		}
	}
	c.fig("requests received", int(in.Counts.RequestsReceived))
	c.fig("request records", len(in.Requests))
	c.fig("receipts from the service", receipts)
	c.fig("calls whose reply was lost", lost)
	c.fig("of which replies dropped by the service", dropped)
	c.fig("of which the message finished on another delivery", finishedLater)
	c.fig("of which still in flight", inFlight)
	c.fig("calls from outside the executors", external)
	c.fig("calls for messages before the window (excluded)", before)
	c.fig("calls for messages stored while verify read (excluded)", after)
	if in.Counts.RequestsReceived != int64(len(in.Requests)) {
		c.violate("the counter says %d requests, the records hold %d", in.Counts.RequestsReceived, len(in.Requests))
	}
	if int64(receipts+lost+external+before+after) != in.Counts.RequestsReceived {
		c.violate("%d receipts + %d lost + %d external + %d outside the window ≠ %d requests received",
			receipts, lost, external, before+after, in.Counts.RequestsReceived)
	}
	if allowed := int(in.Consumer.Pending) + in.Consumer.AckPending; inFlight > allowed {
		c.violate("%d calls have no receipt and their messages are unfinished, more than the %d messages in flight", inFlight, allowed)
	}
	return c
}

// 5. No conflict changed a first record.
func checkFirstRecords(in *Input) Check {
	c := Check{N: 5, Name: "no conflict changed a first record", OK: true}
	bySeq := map[uint64]*provider.RequestRecord{}
	for i := range in.Requests {
		bySeq[in.Requests[i].Seq] = &in.Requests[i]
	}
	create := map[string]provider.CreateRecord{}
	for _, cr := range in.Creates {
		if _, ok := create[cr.IntentID]; !ok {
			create[cr.IntentID] = cr
		}
	}
	first := map[string]provider.FirstResult{}
	for _, f := range in.Intents {
		first[f.IntentID] = f
		req, ok := bySeq[f.RequestSeq]
		switch {
		case !ok:
			c.violate("intent %q: its first record points at request %d, which is not recorded", f.IntentID, f.RequestSeq)
		case req.Outcome != document.OutcomeCreated || req.RequestDigest != f.RequestDigest || req.TaskID != f.TaskID:
			c.violate("intent %q: first record (%s, %s) differs from the request that created it (%s, %s, %s)",
				f.IntentID, f.RequestDigest, f.TaskID, req.Outcome, req.RequestDigest, req.TaskID)
		}
		if cr, ok := create[f.IntentID]; ok && (cr.RequestDigest != f.RequestDigest || cr.TaskID != f.TaskID) {
			c.violate("intent %q: first record (%s, %s) differs from its create (%s, %s)", f.IntentID, f.RequestDigest, f.TaskID, cr.RequestDigest, cr.TaskID)
		}
	}
	var conflicts, replays int
	for _, r := range in.Requests {
		f, ok := first[r.IntentID]
		switch r.Outcome {
		case document.OutcomeConflict:
			conflicts++
			if !ok || r.RequestDigest == f.RequestDigest || r.TaskID != f.TaskID {
				c.violate("request %d: a conflict for intent %q that does not match its first record", r.Seq, r.IntentID)
			}
		case document.OutcomeReplayed:
			replays++
			if !ok || r.RequestDigest != f.RequestDigest || r.TaskID != f.TaskID {
				c.violate("request %d: a replay for intent %q that does not match its first record", r.Seq, r.IntentID)
			}
		}
	}
	c.fig("first records", len(in.Intents))
	c.fig("conflicts", conflicts)
	c.fig("replays", replays)
	return c
}

// 6. No rejected message reached the service.
func checkRejected(in *Input) Check {
	c := Check{N: 6, Name: "no rejected message reached the service", OK: true}
	rejected := map[uint64]bool{}
	for seq, rs := range in.Receipts {
		for _, r := range rs {
			if r.Outcome == document.OutcomeRejected {
				rejected[seq] = true
			}
		}
	}
	for _, r := range in.Requests {
		if seq, _, ok := callSeq(r.CallRef); ok && rejected[seq] {
			c.violate("message %d was rejected, yet request %d (%s) reached the service", seq, r.Seq, r.CallRef)
		}
	}
	// A rejected message with a receipt of the service's outcome too is a
	// contradiction, reported by check 1.
	c.fig("rejected messages", len(rejected))
	return c
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
