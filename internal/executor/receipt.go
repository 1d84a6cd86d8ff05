package executor

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/internal/tracing"
)

// clip shortens a text taken from the message or an error to what a receipt
// may hold (document.MaxTextBytes), at a character boundary, so that a
// message with, say, a very long member name still gets a receipt that
// decodes.
func clip(s string) string { return clipTo(s, document.MaxTextBytes) }

// clipTo shortens s to at most limit bytes, at a character boundary, ending
// in an ellipsis when it was cut.
func clipTo(s string, limit int) string {
	const ellipsis = "…"
	if len(s) <= limit {
		return s
	}
	n := max(limit-len(ellipsis), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// receipt starts a receipt for this delivery.
func (e *Executor) receipt(d *delivery, outcome string) *document.Receipt {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var storedAt string
	if !d.stored.IsZero() {
		storedAt = d.stored.UTC().Format(time.RFC3339Nano)
	}
	return &document.Receipt{
		SchemaVersion: document.ReceiptVersion,
		ReceiptID:     "receipt-" + d.attempt,
		Outcome:       outcome,
		IntentID:      opt(d.id.IntentID),
		Scope:         receiptScope(d),
		RequestID:     opt(d.id.RequestID),
		ApprovalID:    opt(d.id.ApprovalID),
		Delivery:      document.Delivery{StreamSeq: d.seq, Delivered: d.delivered, Attempt: d.attempt, Executor: e.cfg.ID, StoredAt: storedAt},
		IssuedAt:      e.cfg.Clock().UTC().Format(time.RFC3339Nano),
		TraceID:       tracing.TraceID(d.ctx),
	}
}

// receiptScope is the key's scope that a receipt names: the request's
// (its scope, or default) once the gate has read it; before that, the
// scope the message names if it is one, else the scope of the subject it
// was delivered on (where its receipt is filed), and none when that is not
// a scope either.
func receiptScope(d *delivery) string {
	switch {
	case d.id.Scope != "":
		return d.id.Scope
	case document.ValidScope(d.scope):
		return d.scope
	}
	return ""
}

// finish stores the receipt and then acks (or, for terminal refusals,
// terminates) the message; a message whose receipt cannot be stored is
// nak'ed so that it comes back. The receipt joins a batch when batches are
// running; the delivery's handler slot is released as soon as it waits.
func (e *Executor) finish(d *delivery, r *document.Receipt, term bool) {
	p, err := e.pendingReceipt(d, r, term)
	if err != nil {
		e.retry(d, "encoding a receipt failed", err)
		return
	}
	// The receipt store span lasts until the receipt is stored or given
	// up (stored, notStored), however long its batch takes.
	_, p.span = d.child(spanReceiptStore)
	// Signal progress until the receipt is stored and the message acked,
	// however long its batch takes.
	p.progress = e.progress(d.msg)
	e.receipts.add(p)
}

// pendingReceipt makes the message that stores r.
func (e *Executor) pendingReceipt(d *delivery, r *document.Receipt, term bool) (*pending, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("executor: encoding a receipt: %w", err)
	}
	m := nats.NewMsg(subjects.Receipt(d.scope, d.id.IntentID))
	m.Data = body
	m.Header.Set(topology.HeaderOutcome, r.Outcome)
	m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(d.seq, 10))
	m.Header.Set(topology.HeaderDelivered, strconv.FormatUint(d.delivered, 10))
	m.Header.Set(jetstream.MsgIDHeader, r.ReceiptID)
	m.Header.Set(jetstream.ExpectedStreamHeader, topology.ReceiptsStream)
	tracing.Inject(d.ctx, m.Header)
	return &pending{d: d, r: r, m: m, term: term, span: noSpan}, nil
}

// stored finishes a delivery whose receipt is stored: the fault points, the
// ack (or termination) and the hooks.
func (e *Executor) stored(p *pending) {
	d, r := p.d, p.r
	p.stopProgress()
	endChild(p.span, nil)
	e.fault(AfterReceipt, d)
	e.fault(BeforeAck, d)
	_, ack := d.child(spanAck)
	var err error
	switch {
	case p.term:
		err = d.msg.Term()
	case r.Outcome == document.OutcomeInDoubt:
		// The receipt ends nothing: the message comes back.
		err = d.msg.NakWithDelay(d.comeBack)
	default:
		err = d.msg.Ack()
	}
	endChild(ack, err)
	if err != nil {
		e.log.WarnContext(d.ctx, "ack failed; the delivery comes back and is answered as a replay", "stream_seq", d.seq, "err", err)
	}
	took := time.Since(d.start)
	if e.cfg.OnReceipt != nil {
		e.cfg.OnReceipt(r, took)
	}
	if r.TaskID != nil && d.recording() {
		d.span.SetAttributes(tracing.TaskID.String(*r.TaskID))
	}
	if e.log.Enabled(d.ctx, slog.LevelInfo) {
		attrs := []any{"outcome", r.Outcome, "intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered,
			"took", took.Round(time.Microsecond)}
		if r.TaskID != nil {
			attrs = append(attrs, "task_id", *r.TaskID)
		}
		if r.Rejection != nil {
			attrs = append(attrs, "check", r.Rejection.Check, "path", r.Rejection.Path)
		}
		if r.DecidedAfter != "" {
			attrs = append(attrs, "decided_after", r.DecidedAfter)
		}
		e.log.InfoContext(d.ctx, "receipt", attrs...)
	}
	d.done(r.Outcome, nil)
}

// notStored gives a delivery whose receipt could not be stored back for a
// later attempt.
func (e *Executor) notStored(p *pending, err error) {
	p.stopProgress()
	endChild(p.span, err)
	e.retry(p.d, "storing the receipt failed; the delivery comes back", err)
}
