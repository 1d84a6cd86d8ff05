package audit

import (
	"cmp"
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
	"github.com/sendtwice/sendtwice/taskservice"
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
	// Deletes are the tasks deleted by their owners; Keys the service's
	// figures of keys (live, compacted), deleted tasks and retired
	// records; Scopes its counters per scope; Lifetime how long it keeps
	// keys and records.
	Deletes  []provider.DeleteRecord
	Keys     provider.KeyCounts
	Scopes   []provider.ScopeCounts
	Lifetime Lifetime
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
	// OtherStoreIDs are the stores of the listed service's other
	// destinations, audited with StoreID's.
	OtherStoreIDs []string `json:"other_store_ids,omitempty"`
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
func LoadWith(ctx context.Context, nc *nats.Conn, lister taskservice.Lister) (*Input, error) {
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
		in.Service = ServiceIdentity{StoreID: l.StoreID, OtherStoreIDs: l.OtherStoreIDs, Name: l.Name}
		return in, finishLoad(ctx, js, in)
	}
	if err := readService(ctx, provider.NewClient(nc), in); err != nil {
		return nil, err
	}
	return in, finishLoad(ctx, js, in)
}

// serviceReads bounds how often readService reads the records again
// because the service changed them while they were read.
const serviceReads = 5

// readService reads the task service's counters and every record into in.
// The service may change its records while they are read (a compaction in
// the background, a delete, a create from outside): the counters are read
// before and after, and the records read again until both agree, so that
// counters and records describe one state.
func readService(ctx context.Context, svc *provider.Client, in *Input) error {
	si, err := svc.Info(ctx)
	if err != nil {
		return fmt.Errorf("audit: reading the task service's counters: %w", err)
	}
	for try := 1; ; try++ {
		in.Requests, in.Creates, in.Tasks, in.Intents, in.Deletes = nil, nil, nil, nil, nil
		for _, kind := range []string{provider.RecordRequests, provider.RecordCreates, provider.RecordTasks, provider.RecordIntents, provider.RecordDeletes} {
			var after uint64
			for {
				page, err := svc.Records(ctx, provider.RecordsRequest{Kind: kind, AfterSeq: after, Limit: provider.MaxRecordsLimit})
				if err != nil {
					return fmt.Errorf("audit: reading the task service's %s: %w", kind, err)
				}
				in.Requests = append(in.Requests, page.Requests...)
				in.Creates = append(in.Creates, page.Creates...)
				in.Tasks = append(in.Tasks, page.Tasks...)
				in.Intents = append(in.Intents, page.Intents...)
				in.Deletes = append(in.Deletes, page.Deletes...)
				if page.NextSeq == 0 || page.NextSeq == after {
					break
				}
				after = page.NextSeq
			}
		}
		again, err := svc.Info(ctx)
		if err != nil {
			return fmt.Errorf("audit: reading the task service's counters: %w", err)
		}
		same := again.Counts == si.Counts && again.Keys == si.Keys
		si = again
		if same || try == serviceReads {
			break
		}
	}
	in.Counts, in.Keys, in.Scopes = si.Counts, si.Keys, si.Scopes
	in.Service = ServiceIdentity{StoreID: si.StoreID, Instance: si.Instance, Host: si.Host, PID: si.PID}
	if in.Lifetime, err = serviceLifetime(si); err != nil {
		return err
	}
	return nil
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
	// Listing sums up the tasks a service that keeps no call log listed:
	// the pipeline's and those the probe and the demo left (null for a
	// service audited by its records).
	Listing *ListingSummary `json:"listing,omitempty"`
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

// callRef is the call reference of the call a receipt reports.
func callRef(r *document.Receipt) string {
	return fmt.Sprintf("%s:%d:%d:%s", topology.ApprovalsStream, r.Delivery.StreamSeq, r.Delivery.Delivered, r.Delivery.Attempt)
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
	// Serves are the (provider, destination) pairs the audited service
	// serves: the gate's re-run refuses a message for any other, as the
	// executors' gates did. Nil skips that check.
	Serves []gate.Destination
}

// recheck re-runs the gate on one stored message: the full check with the
// Gate, else the checks that need no keys.
func (o Options) recheck(subject string, envelope []byte, stored time.Time) (*gate.Verdict, error) {
	var v *gate.Verdict
	var err error
	if o.Gate == nil {
		v, err = gate.CheckDeliveryBindings(subject, envelope)
	} else {
		v, err = o.Gate.CheckDelivery(subject, envelope, stored)
	}
	if err != nil || o.Serves == nil || v.Request == nil {
		return v, err
	}
	// The destinations the audited service serves, as its executors'
	// gates checked them (a Gate with its own Serves has checked already).
	if err := gate.Serves(o.Serves, v.Request); err != nil {
		return nil, err
	}
	return v, nil
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
		checkOneCreate(v),
		checkCounters(in),
		checkRequests(v),
		checkFirstRecords(v),
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
	rep := Report{OK: true, Window: v.window(), Gate: describeGate(o.Gate, o.Serves != nil), Service: in.Service, Checks: checks}
	if in.Listing != nil {
		sum := summarize(*in.Listing, pipelineKeys(in, v))
		rep.Listing = &sum
	}
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
			terminal = terminal || r.Of(seq)
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

// 2. Per key (scope, intent id) at most one create, and every created or
// replayed receipt of that key names its one task, never another key's; a
// receipt that says its task was deleted names a key whose task was
// deleted, and no key is created again after its task was deleted. A
// receipt whose key record is gone is checked against the key's deadline
// (see keys.go): after it the key was compacted on time and its first
// result can no longer be compared (counted); before it the key was
// forgotten too early (a violation).
func checkOneCreate(v *view) Check {
	in := v.in
	c := Check{N: 2, Name: "at most one create per key (scope, intent id); its created and replayed receipts name its one task, never another key's; a deleted task's key is replayed, never created again", OK: true}
	creates := map[key]int{}
	for _, cr := range in.Creates {
		creates[keyOf(cr.Scope, cr.IntentID)]++
	}
	var doubled []key
	for k, n := range creates {
		if n > 1 {
			doubled = append(doubled, k)
		}
	}
	slices.SortFunc(doubled, compareKeys)
	for _, k := range doubled {
		c.violate("%s was created %d times", k, creates[k])
	}
	first := map[key]provider.FirstResult{}
	for _, f := range in.Intents {
		first[keyOf(f.Scope, f.IntentID)] = f
	}
	// owner is the key each task id was created for, as the service's
	// records say.
	owner := map[string]key{}
	own := func(task string, k key) {
		if _, ok := owner[task]; !ok && task != "" {
			owner[task] = k
		}
	}
	for _, cr := range in.Creates {
		own(cr.TaskID, keyOf(cr.Scope, cr.IntentID))
	}
	for _, t := range in.Tasks {
		own(t.TaskID, keyOf(t.Scope, t.IntentID))
	}
	for _, f := range in.Intents {
		own(f.TaskID, keyOf(f.Scope, f.IntentID))
	}
	deleted := map[key]provider.DeleteRecord{}
	for _, d := range in.Deletes {
		k := keyOf(d.Scope, d.IntentID)
		own(d.TaskID, k)
		deleted[k] = d
	}
	calls := map[string]provider.RequestRecord{}
	for _, r := range in.Requests {
		calls[r.CallRef] = r
	}
	tasks := map[key]string{}
	var checked, otherKey, compacted, unchecked, deletedReplays int
	for _, seq := range sortedSeqs(in.Receipts) {
		for _, r := range in.Receipts[seq] {
			if r.Outcome != document.OutcomeCreated && r.Outcome != document.OutcomeReplayed || r.IntentID == nil || r.TaskID == nil {
				continue
			}
			checked++
			k, task := receiptKey(r), *r.TaskID
			if o, ok := owner[task]; ok && o != k {
				otherKey++
				c.violate("receipt %s (%s) of message %d is for %s, but names task %s, which the service created for %s", r.ReceiptID, r.Outcome, seq, k, task, o)
				continue
			}
			if prev, ok := tasks[k]; ok && prev != task {
				c.violate("%s: receipts name tasks %s and %s", k, prev, task)
			}
			tasks[k] = task
			f, kept := first[k]
			switch {
			case kept && f.TaskID != task:
				c.violate("%s: receipt of message %d names %s, the service's first result %s", k, seq, task, f.TaskID)
			case !kept:
				// The key's deadline: from the approval the stream holds,
				// else from the not_after its call carried.
				deadline, ok := v.keyDeadline(seq)
				known := v.place(seq) == inWindow
				if !known {
					if req, found := calls[callRef(r)]; found {
						deadline, ok = v.requestDeadline(req)
						known = true
					}
				}
				switch {
				case v.compactable(deadline, ok):
					compacted++
				case !known:
					unchecked++
				case !ok:
					c.violate("receipt %s (%s) of message %d names %s, whose key the service no longer keeps, although its approval never expires (the key must be kept forever)",
						r.ReceiptID, r.Outcome, seq, k)
				default:
					c.violate("receipt %s (%s) of message %d names %s, whose key the service no longer keeps, although an approval could resend it until %s: the key was forgotten too early",
						r.ReceiptID, r.Outcome, seq, k, deadline.UTC().Format(time.RFC3339))
				}
			}
			d, wasDeleted := deleted[k]
			if r.TaskDeleted {
				deletedReplays++
				if !wasDeleted {
					c.violate("receipt %s (%s) of message %d says the task %s of %s was deleted, but the service deleted no task of that key", r.ReceiptID, r.Outcome, seq, task, k)
				}
			}
			if wasDeleted && r.Outcome == document.OutcomeCreated && task != d.TaskID {
				c.violate("receipt %s of message %d: %s was created again (task %s) after its task %s was deleted at %s", r.ReceiptID, seq, k, task, d.TaskID, d.DeletedAt)
			}
		}
	}
	c.fig("keys with a create", len(creates))
	c.fig("doubled keys", len(doubled))
	c.fig("created and replayed receipts checked", checked)
	c.fig("receipts naming another key's task", otherKey)
	c.fig("replayed receipts of a deleted task", deletedReplays)
	c.fig("receipts whose key was compacted after its deadline (outside the audit window)", compacted)
	c.fig("receipts whose key is gone, with neither their approval nor their call on record (not checked)", unchecked)
	if compacted > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d created or replayed receipts name keys compacted after their deadline (approval not_after + the approvals stream's max age + the service's clock allowance %s and margin %s): their first result could not be compared",
			compacted, in.Lifetime.ClockAllowance, in.Lifetime.Margin))
	}
	if unchecked > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d created or replayed receipts name keys the service no longer keeps, for messages the stream no longer holds and calls whose records were retired: their keys' deadlines could not be checked", unchecked))
	}
	return c
}

func compareKeys(a, b key) int {
	return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.intent, b.intent))
}

// 3. The counters agree with each other and with the records: every
// create made a task, which exists or was deleted (creates executed =
// tasks existing + tasks deleted), and a key, which is live or compacted
// (= keys live + keys compacted); every live key names its task (existing,
// or deleted with a delete record); request and create records missing
// are the records retired, and only under a records retention.
func checkCounters(in *Input) Check {
	c := Check{N: 3, Name: "creates executed = tasks existing + tasks deleted = keys live + keys compacted; every live key names its one task", OK: true}
	n := in.Counts.CreatesExecuted
	k := in.Keys
	c.fig("creates executed", int(n))
	c.fig("tasks existing", int(in.Counts.TasksExisting))
	c.fig("tasks deleted", int(k.TasksDeleted))
	c.fig("keys live", int(k.Live))
	c.fig("keys compacted (intent records removed after their deadline, not a violation)", int(k.Compacted))
	c.fig("create records", len(in.Creates))
	c.fig("task records", len(in.Tasks))
	c.fig("delete records", len(in.Deletes))
	c.fig("intent records", len(in.Intents))
	c.fig("records retired by the records retention", int(k.RecordsRetired))
	if in.Counts.TasksExisting+k.TasksDeleted != n {
		c.violate("creates executed %d ≠ tasks existing %d + tasks deleted %d", n, in.Counts.TasksExisting, k.TasksDeleted)
	}
	if k.Live+k.Compacted != n {
		c.violate("creates executed %d ≠ keys live %d + keys compacted %d: a create that made no key of its own", n, k.Live, k.Compacted)
	}
	if int64(len(in.Tasks)) != in.Counts.TasksExisting || int64(len(in.Deletes)) != k.TasksDeleted || int64(len(in.Intents)) != k.Live {
		c.violate("records differ from the counters: %d task records for %d tasks existing, %d delete records for %d tasks deleted, %d intent records for %d keys live",
			len(in.Tasks), in.Counts.TasksExisting, len(in.Deletes), k.TasksDeleted, len(in.Intents), k.Live)
	}
	retiredRequests := in.Counts.RequestsReceived - int64(len(in.Requests))
	retiredCreates := n - int64(len(in.Creates))
	switch {
	case retiredRequests < 0 || retiredCreates < 0:
		c.violate("more records than the counters count: %d request records for %d requests received, %d create records for %d creates executed",
			len(in.Requests), in.Counts.RequestsReceived, len(in.Creates), n)
	case retiredRequests+retiredCreates != k.RecordsRetired:
		c.violate("%d request records and %d create records are missing, but the service retired %d records", retiredRequests, retiredCreates, k.RecordsRetired)
	case k.RecordsRetired > 0 && in.Lifetime.RecordsRetention == 0:
		c.violate("the service retired %d records although it keeps records forever", k.RecordsRetired)
	}
	if k.Compacted > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d keys were compacted after their deadline: intent records are fewer than creates by that many, which is not a violation", k.Compacted))
	}
	if k.RecordsRetired > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d request records and %d create records were retired by the records retention (%s): the calls and creates they recorded cannot be checked",
			retiredRequests, retiredCreates, in.Lifetime.RecordsRetention))
	}
	// One task per live key: the task its intent record names exists, or
	// was deleted; a task of a live key is that key's task.
	taskByID := map[string]provider.TaskRecord{}
	for _, t := range in.Tasks {
		taskByID[t.TaskID] = t
	}
	deletedByID := map[string]provider.DeleteRecord{}
	for _, d := range in.Deletes {
		deletedByID[d.TaskID] = d
	}
	first := map[key]provider.FirstResult{}
	for _, f := range in.Intents {
		fk := keyOf(f.Scope, f.IntentID)
		first[fk] = f
		t, exists := taskByID[f.TaskID]
		d, gone := deletedByID[f.TaskID]
		switch {
		case exists && keyOf(t.Scope, t.IntentID) != fk:
			c.violate("%s names task %s, which is %s's", fk, f.TaskID, keyOf(t.Scope, t.IntentID))
		case gone && keyOf(d.Scope, d.IntentID) != fk:
			c.violate("%s names task %s, deleted as %s's", fk, f.TaskID, keyOf(d.Scope, d.IntentID))
		case !exists && !gone:
			c.violate("%s names task %s, which neither exists nor was deleted", fk, f.TaskID)
		case exists && f.TaskDeleted:
			c.violate("%s says its task %s was deleted, but the task exists", fk, f.TaskID)
		case gone && !f.TaskDeleted:
			c.violate("%s does not say its task %s was deleted, but a delete record says so", fk, f.TaskID)
		}
	}
	for _, t := range in.Tasks {
		if f, ok := first[keyOf(t.Scope, t.IntentID)]; ok && f.TaskID != t.TaskID {
			c.violate("task %s of %s exists beside the key's own task %s", t.TaskID, keyOf(t.Scope, t.IntentID), f.TaskID)
		}
	}
	if len(in.Scopes) > 0 {
		var sum provider.Counts
		for _, s := range in.Scopes {
			sum.RequestsReceived += s.RequestsReceived
			sum.CreatesExecuted += s.CreatesExecuted
			sum.TasksExisting += s.TasksExisting
		}
		if sum != in.Counts {
			c.violate("the scopes' counters add up to %d, %d, %d, the totals say %d, %d, %d", sum.RequestsReceived, sum.CreatesExecuted, sum.TasksExisting,
				in.Counts.RequestsReceived, in.Counts.CreatesExecuted, in.Counts.TasksExisting)
		}
		c.fig("scopes", len(in.Scopes))
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
	var receipts, retired int
	for _, seq := range sortedSeqs(in.Receipts) {
		if p := v.place(seq); p == beforeWindow || p == afterWindow {
			continue
		}
		for _, r := range in.Receipts[seq] {
			if !serviceOutcome(r.Outcome) {
				continue
			}
			receipts++
			ref := callRef(r)
			req, ok := byRef[ref]
			switch {
			case !ok && v.retirable(v.messageStored(seq)):
				// The call's record may have been retired by the
				// records retention: it cannot be matched.
				retired++
				continue
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
	c.fig("receipts whose call record was retired (not matched)", retired)
	if in.Lifetime.RecordsRetention == 0 && in.Counts.RequestsReceived != int64(len(in.Requests)) {
		c.violate("the counter says %d requests, the records hold %d", in.Counts.RequestsReceived, len(in.Requests))
	}
	if in.Counts.RequestsReceived < int64(len(in.Requests)) {
		c.violate("the counter says %d requests, the records hold more: %d", in.Counts.RequestsReceived, len(in.Requests))
	}
	if receipts-retired+lost+external+before+after != len(in.Requests) {
		c.violate("%d receipts + %d lost + %d external + %d outside the window ≠ %d request records (%d requests received)",
			receipts-retired, lost, external, before+after, len(in.Requests), in.Counts.RequestsReceived)
	}
	if n := in.Counts.RequestsReceived - int64(len(in.Requests)); n > 0 && in.Lifetime.RecordsRetention > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d request records were retired by the records retention (%s): %d receipts of calls older than it could not be matched to their calls",
			n, in.Lifetime.RecordsRetention, retired))
	}
	if allowed := int(in.Consumer.Pending) + in.Consumer.AckPending; inFlight > allowed {
		c.violate("%d calls have no receipt and their messages are unfinished, more than the %d messages in flight", inFlight, allowed)
	}
	return c
}

// 5. No conflict changed a first record. Records are matched by key
// (scope, intent id). A first record whose creating request was retired
// by the records retention, and a replay or conflict whose key was
// compacted after its deadline, are counted, not violations.
func checkFirstRecords(v *view) Check {
	in := v.in
	c := Check{N: 5, Name: "no conflict changed a first record", OK: true}
	bySeq := map[uint64]*provider.RequestRecord{}
	for i := range in.Requests {
		bySeq[in.Requests[i].Seq] = &in.Requests[i]
	}
	create := map[key]provider.CreateRecord{}
	for _, cr := range in.Creates {
		if _, ok := create[keyOf(cr.Scope, cr.IntentID)]; !ok {
			create[keyOf(cr.Scope, cr.IntentID)] = cr
		}
	}
	first := map[key]provider.FirstResult{}
	var retired, compacted int
	for _, f := range in.Intents {
		k := keyOf(f.Scope, f.IntentID)
		first[k] = f
		req, ok := bySeq[f.RequestSeq]
		switch {
		case !ok && v.retirable(parseTime(f.CreatedAt)):
			retired++
		case !ok:
			c.violate("%s: its first record points at request %d, which is not recorded", k, f.RequestSeq)
		case req.Outcome != document.OutcomeCreated || req.RequestDigest != f.RequestDigest || req.TaskID != f.TaskID:
			c.violate("%s: first record (%s, %s) differs from the request that created it (%s, %s, %s)",
				k, f.RequestDigest, f.TaskID, req.Outcome, req.RequestDigest, req.TaskID)
		}
		if cr, ok := create[k]; ok && (cr.RequestDigest != f.RequestDigest || cr.TaskID != f.TaskID) {
			c.violate("%s: first record (%s, %s) differs from its create (%s, %s)", k, f.RequestDigest, f.TaskID, cr.RequestDigest, cr.TaskID)
		}
	}
	var conflicts, replays int
	for _, r := range in.Requests {
		if r.Outcome != document.OutcomeConflict && r.Outcome != document.OutcomeReplayed {
			continue
		}
		k := keyOf(r.Scope, r.IntentID)
		f, ok := first[k]
		if !ok || r.Seq < f.RequestSeq {
			// The key this call met is no longer kept (or was kept
			// before a compaction and created anew since).
			if deadline, ok := v.requestDeadline(r); v.compactable(deadline, ok) {
				compacted++
				continue
			}
			why := "its approval never expires"
			if r.NotAfter != "" {
				why = "the key deadline its call carried (" + r.NotAfter + ") has not passed"
			}
			c.violate("request %d: a %s for %s, whose key the service no longer keeps although %s", r.Seq, r.Outcome, k, why)
			continue
		}
		switch r.Outcome {
		case document.OutcomeConflict:
			conflicts++
			if r.RequestDigest == f.RequestDigest || r.TaskID != f.TaskID {
				c.violate("request %d: a conflict for %s that does not match its first record", r.Seq, k)
			}
		case document.OutcomeReplayed:
			replays++
			if r.RequestDigest != f.RequestDigest || r.TaskID != f.TaskID {
				c.violate("request %d: a replay for %s that does not match its first record", r.Seq, k)
			}
		}
		if r.TaskDeleted && !f.TaskDeleted {
			c.violate("request %d: answered with the deleted mark for %s, whose task was not deleted", r.Seq, k)
		}
	}
	c.fig("first records", len(in.Intents))
	c.fig("conflicts", conflicts)
	c.fig("replays", replays)
	c.fig("first records whose creating request was retired (not compared)", retired)
	c.fig("replays and conflicts whose key was compacted after its deadline (outside the audit window)", compacted)
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
