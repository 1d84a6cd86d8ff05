package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/send"
)

// ExitNoReceipt is the exit status of a send whose message was published
// but whose receipt did not come (publisher send).
const ExitNoReceipt = 6

// publishedError says that a message was published and why no receipt
// came; it wraps the wait's error.
type publishedError struct {
	msg string
	err error
}

func (e *publishedError) Error() string { return e.msg }
func (e *publishedError) Unwrap() error { return e.err }

// PublishedNoReceipt is the error of a send whose message is stored as
// sent but whose wait for the receipt failed with err (an error of package
// send, which matches send.ErrNoReceipt): it says so plainly, with
// ExitNoReceipt, naming the publish's trace when it was traced. ctx is the
// command's context (ended: the wait was interrupted); wait bounded the
// wait.
func PublishedNoReceipt(ctx context.Context, sent send.Sent, wait time.Duration, err error) *ExitError {
	why := strings.TrimPrefix(err.Error(), fmt.Sprintf("%s for stream message %d: ", send.ErrNoReceipt, sent.StreamSeq))
	switch {
	case ctx.Err() != nil:
		why = "the wait was interrupted"
	case errors.Is(err, context.DeadlineExceeded):
		// The deadline, and a failed read of the stored receipts if any.
		why = fmt.Sprintf("none within %s", wait) + strings.TrimPrefix(why, context.DeadlineExceeded.Error())
	}
	trace := ""
	if sent.TraceID != "" {
		trace = " in trace " + sent.TraceID
	}
	return &ExitError{Code: ExitNoReceipt, Err: &publishedError{
		msg: fmt.Sprintf("published as APPROVALS message %d%s; no receipt: %s; an executor may still be working on it, and sending again is safe", sent.StreamSeq, trace, why),
		err: err,
	}}
}
