package document

import "github.com/sendtwice/sendtwice/internal/canon"

// DecodeReceipt decodes a task-receipt.v1 document strictly.
func DecodeReceipt(data []byte) (*Receipt, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	var r reader
	m := r.object("$", v, "schema_version", "receipt_id", "outcome", "intent_id", "scope?", "request_id", "approval_id",
		"task_id", "task_deleted?", "rejection", "failure", "counts", "store_id?", "note?", "decided_after?", "delivery", "issued_at", "trace_id?")
	if m == nil {
		return nil, r.result()
	}
	r.schemaVersion("$", m, ReceiptVersion)
	rc := &Receipt{SchemaVersion: ReceiptVersion}
	r.receiptNames(rc, m)
	if v, ok := m["task_deleted"]; ok && r.err == nil {
		rc.TaskDeleted = r.taskDeleted(v)
	}
	if m["rejection"] != nil {
		if rm := r.object("$.rejection", m["rejection"], "check", "path", "reason"); rm != nil {
			rc.Rejection = &Rejection{
				Check:  r.id("$.rejection.check", rm["check"]),
				Path:   r.text("$.rejection.path", rm["path"], MaxTextBytes),
				Reason: r.text("$.rejection.reason", rm["reason"], MaxTextBytes),
			}
		}
	}
	if m["failure"] != nil {
		if fm := r.object("$.failure", m["failure"], "reason", "attempts"); fm != nil {
			rc.Failure = &Failure{
				Reason:   r.text("$.failure.reason", fm["reason"], MaxTextBytes),
				Attempts: r.integer("$.failure.attempts", fm["attempts"]),
			}
		}
	}
	if m["counts"] != nil {
		if cm := r.object("$.counts", m["counts"], "requests_received", "creates_executed", "tasks_existing"); cm != nil {
			rc.Counts = &Counts{
				RequestsReceived: r.integer("$.counts.requests_received", cm["requests_received"]),
				CreatesExecuted:  r.integer("$.counts.creates_executed", cm["creates_executed"]),
				TasksExisting:    r.integer("$.counts.tasks_existing", cm["tasks_existing"]),
			}
		}
	}
	rc.StoreID = r.nullable("$.store_id", m["store_id"], r.id)
	if v, ok := m["note"]; ok {
		rc.Note = r.text("$.note", v, MaxTextBytes)
	}
	if v, ok := m["decided_after"]; ok {
		rc.DecidedAfter = r.timestamp("$.decided_after", v)
	}
	rc.Delivery = r.delivery(m["delivery"])
	rc.IssuedAt = r.timestamp("$.issued_at", m["issued_at"])
	if v, ok := m["trace_id"]; ok {
		rc.TraceID = r.traceID("$.trace_id", v)
	}
	if r.err == nil {
		r.receiptRules(rc)
	}
	if r.err != nil {
		return nil, r.result()
	}
	return rc, nil
}

// receiptNames reads the receipt's id, its outcome and the ids and scope
// it names.
func (r *reader) receiptNames(rc *Receipt, m map[string]any) {
	rc.ReceiptID = r.id("$.receipt_id", m["receipt_id"])
	rc.Outcome = r.id("$.outcome", m["outcome"])
	if r.err == nil && !Known(rc.Outcome) {
		r.fail("$.outcome", RuleValue, ErrValue, "must be one of created, replayed, idempotency_conflict, rejected, dead_lettered, in_doubt")
	}
	rc.IntentID = r.nullable("$.intent_id", m["intent_id"], r.id)
	rc.RequestID = r.nullable("$.request_id", m["request_id"], r.id)
	rc.ApprovalID = r.nullable("$.approval_id", m["approval_id"], r.id)
	rc.TaskID = r.nullable("$.task_id", m["task_id"], r.id)
	if v, ok := m["scope"]; ok {
		rc.Scope = r.scope("$.scope", v)
	}
}

// taskDeleted reads task_deleted, which is true when present.
func (r *reader) taskDeleted(v any) bool {
	switch b, isBool := v.(bool); {
	case !isBool:
		r.fail("$.task_deleted", RuleType, ErrType, "must be true, not %s", canon.TypeName(v))
	case !b:
		r.fail("$.task_deleted", RuleValue, ErrValue, "must be true when present: a task that was not deleted is said by leaving the member out")
	default:
		return true
	}
	return false
}

// delivery reads a receipt's delivery member.
func (r *reader) delivery(v any) Delivery {
	dm := r.object("$.delivery", v, "stream_seq", "delivered", "attempt", "executor", "stored_at?")
	if dm == nil {
		return Delivery{}
	}
	d := Delivery{
		StreamSeq: uint64(r.integer("$.delivery.stream_seq", dm["stream_seq"])),
		Delivered: uint64(r.integer("$.delivery.delivered", dm["delivered"])),
		Attempt:   r.id("$.delivery.attempt", dm["attempt"]),
		Executor:  r.id("$.delivery.executor", dm["executor"]),
	}
	if _, ok := dm["stored_at"]; ok {
		d.StoredAt = r.timestamp("$.delivery.stored_at", dm["stored_at"])
	}
	return d
}

// receiptRules ties the outcome to the members it implies: a service
// outcome names its task (and the service's counters when it keeps them); a
// rejection names its check; a dead letter says why; an in_doubt receipt
// says until when; and nothing names what did not happen.
func (r *reader) receiptRules(rc *Receipt) {
	service := rc.Outcome == OutcomeCreated || rc.Outcome == OutcomeReplayed || rc.Outcome == OutcomeConflict
	noAnswer := "the service was not called"
	if rc.Outcome == OutcomeInDoubt {
		noAnswer = "the service answered that the key is in doubt, with no task"
	}
	switch {
	case service && rc.TaskID == nil:
		r.fail("$.task_id", RuleValue, ErrValue, "a %s receipt must name the task", rc.Outcome)
	case rc.Outcome == OutcomeInDoubt && rc.TaskID != nil:
		r.fail("$.task_id", RuleValue, ErrValue, "a %s receipt must not name a task: %s", rc.Outcome, noAnswer)
	case !service && rc.Counts != nil:
		r.fail("$.counts", RuleValue, ErrValue, "a %s receipt must not carry counters: %s", rc.Outcome, noAnswer)
	case !service && rc.StoreID != nil:
		r.fail("$.store_id", RuleValue, ErrValue, "a %s receipt must not name a store: %s", rc.Outcome, noAnswer)
	case (rc.Outcome == OutcomeInDoubt) != (rc.DecidedAfter != ""):
		r.fail("$.decided_after", RuleValue, ErrValue, "decided_after must be set exactly when the outcome is in_doubt")
	case (rc.Outcome == OutcomeRejected) != (rc.Rejection != nil):
		r.fail("$.rejection", RuleValue, ErrValue, "rejection must be set exactly when the outcome is rejected")
	case (rc.Outcome == OutcomeDeadLettered) != (rc.Failure != nil):
		r.fail("$.failure", RuleValue, ErrValue, "failure must be set exactly when the outcome is dead_lettered")
	case rc.TaskDeleted && rc.Outcome != OutcomeReplayed:
		r.fail("$.task_deleted", RuleValue, ErrValue, "a %s receipt must not say its task was deleted: only a replay answers for a deleted task", rc.Outcome)
	}
}

// traceID is an OpenTelemetry trace id as W3C trace context writes it: 32
// lower-case hex digits, not all zero.
func (r *reader) traceID(path string, v any) string {
	return r.valid(path, r.text(path, v, MaxIDBytes), validTraceID,
		"must be 32 lower-case hex digits, not all zero (a W3C trace id)")
}

// validTraceID reports whether s is a trace id as W3C trace context writes
// it: 32 lower-case hex digits, not all zero.
func validTraceID(s string) bool {
	if len(s) != 32 || s == zeroTraceID {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// zeroTraceID is the trace id W3C trace context calls invalid.
const zeroTraceID = "00000000000000000000000000000000"
