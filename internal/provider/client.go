package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/tracing"
)

// DefaultTimeout bounds one call of the Client when its context has no
// earlier deadline.
const DefaultTimeout = 5 * time.Second

// Client calls the fake task service over NATS. It is the only way callers
// outside this package reach the service.
type Client struct {
	nc *nats.Conn
	// Timeout bounds each call; 0 means DefaultTimeout. A context deadline
	// that is earlier wins.
	Timeout time.Duration
}

// NewClient returns a Client on nc with the default timeout.
func NewClient(nc *nats.Conn) *Client {
	return &Client{nc: nc, Timeout: DefaultTimeout}
}

// ServiceError is an error reply of the service (micro's
// Nats-Service-Error-Code and Nats-Service-Error headers).
type ServiceError struct {
	Code        string
	Description string
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("provider: service error %s: %s", e.Code, e.Description)
}

// IsTransient reports whether a call failed in a way that a later retry of
// the same call may cure: a timeout, no responders, a deadline, a lost or
// reconnecting connection, or a 5xx service error. A 4xx service error (the
// call itself is wrong) is not transient.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if se, ok := errors.AsType[*ServiceError](err); ok {
		return strings.HasPrefix(se.Code, "5")
	}
	return errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting)
}

// Create asks the service to create a task for req.IntentID. The outcome
// tells whether it did (created), had already done so (replayed), or refused
// because the intent id is bound to different content (idempotency_conflict).
func (c *Client) Create(ctx context.Context, req CreateRequest) (CreateResponse, error) {
	var resp CreateResponse
	data, err := encodeCreateRequest(&req)
	if err != nil {
		err = fmt.Errorf("encode request: %w", err)
	} else {
		data, err = c.roundTrip(ctx, SubjectCreate, data)
	}
	if err == nil {
		if err = decodeCreateResponse(data, &resp); err != nil {
			err = fmt.Errorf("decode reply: %w", err)
		}
	}
	if err != nil {
		return CreateResponse{}, fmt.Errorf("create %q: %w", req.IntentID, err)
	}
	return resp, nil
}

// Stats returns the service's three counters.
func (c *Client) Stats(ctx context.Context) (Counts, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return Counts{}, err
	}
	return info.Counts, nil
}

// Info returns the service's three counters with the id of its store and the
// instance that answered (the stats endpoint's whole reply).
func (c *Client) Info(ctx context.Context) (Info, error) {
	return call[Info](ctx, c, SubjectStats, nil, "stats")
}

// Records returns one page of audit records.
func (c *Client) Records(ctx context.Context, req RecordsRequest) (RecordsResponse, error) {
	return call[RecordsResponse](ctx, c, SubjectRecords, req, "records "+req.Kind)
}

// EachRecord calls fn with every record that req asks for (req.Limit is
// set per page), page after page in sequence order, until fn has had limit
// of them (0: all of them).
func (c *Client) EachRecord(ctx context.Context, req RecordsRequest, limit int, fn func(rec any) error) error {
	n := 0
	for {
		req.Limit = MaxRecordsLimit
		if limit > 0 {
			req.Limit = min(limit-n, MaxRecordsLimit)
		}
		page, err := c.Records(ctx, req)
		if err != nil {
			return err
		}
		for _, rec := range page.records() {
			if err := fn(rec); err != nil {
				return err
			}
			n++
		}
		if page.NextSeq == 0 || (limit > 0 && n >= limit) {
			return nil
		}
		req.AfterSeq = page.NextSeq
	}
}

// records returns the records of a page, whatever their kind.
func (p RecordsResponse) records() []any {
	var out []any
	for _, r := range p.Requests {
		out = append(out, r)
	}
	for _, r := range p.Creates {
		out = append(out, r)
	}
	for _, r := range p.Tasks {
		out = append(out, r)
	}
	for _, r := range p.Intents {
		out = append(out, r)
	}
	for _, r := range p.Deletes {
		out = append(out, r)
	}
	return out
}

// Delete deletes one task the way its owner would (see DeleteRequest). An
// unknown task is a *ServiceError with code "404", one already deleted
// "409".
func (c *Client) Delete(ctx context.Context, req DeleteRequest) (DeleteResponse, error) {
	return call[DeleteResponse](ctx, c, SubjectDelete, req, "delete")
}

// ArmFault arms the fault switch of a service started with faults allowed:
// the replies of the next dropReplies creates are withheld after commit. A
// service without the switch does not answer (no responders).
func (c *Client) ArmFault(ctx context.Context, dropReplies int) (FaultResponse, error) {
	return call[FaultResponse](ctx, c, SubjectFault, FaultRequest{DropReplies: dropReplies}, "arm fault")
}

// call sends body to subject through c and decodes the reply as an Out;
// an error says what was called.
func call[Out any](ctx context.Context, c *Client, subject string, body any, what string) (Out, error) {
	var out Out
	var data []byte
	var err error
	if body != nil {
		if data, err = json.Marshal(body); err != nil {
			return out, fmt.Errorf("%s: encode request: %w", what, err)
		}
	}
	data, err = c.roundTrip(ctx, subject, data)
	if err != nil {
		return out, fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		var none Out
		return none, fmt.Errorf("%s: decode reply: %w", what, err)
	}
	return out, nil
}

// roundTrip sends body (JSON; nil sends nothing) and returns the reply's
// data, or the service's error reply as a *ServiceError. The call ends at
// the context's deadline when one comes within c.Timeout; otherwise a
// deadline c.Timeout away is set for it. With tracing on, the call is a
// client span, "request" and its subject, whose trace context the request
// carries in its headers; with it off, the request has no header and
// nothing is spent on tracing.
func (c *Client) roundTrip(ctx context.Context, subject string, body []byte) (_ []byte, err error) {
	req := nats.Msg{Subject: subject, Data: body}
	if tracing.On() {
		var span trace.Span
		ctx, span = startRequestSpan(ctx, &req)
		defer func() {
			tracing.Fail(span, err)
			span.End()
		}()
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) > timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	msg, err := c.nc.RequestMsgWithContext(ctx, &req)
	if err != nil {
		return nil, err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, &ServiceError{Code: code, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	return msg.Data, nil
}

// startRequestSpan starts the client span of req and writes its trace
// context into req's headers, made for it, when there is one to carry.
func startRequestSpan(ctx context.Context, req *nats.Msg) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, "request "+req.Subject, clientSpan...)
	if span.IsRecording() {
		span.SetAttributes(tracing.NATS, tracing.MessagingDestination.String(req.Subject), tracing.MessagingOperation.String("send"))
	}
	if span.SpanContext().IsValid() {
		req.Header = nats.Header{}
		tracing.Inject(ctx, req.Header)
	}
	return ctx, span
}

// clientSpan starts the span of a call; serverSpan the service's span of
// the call it answers.
var (
	clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
)
