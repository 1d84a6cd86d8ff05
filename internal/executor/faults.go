package executor

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Point names a place in the handling of one delivery where a fault can be
// injected for tests.
type Point string

// Fault points, in the order a delivery passes them.
const (
	// Taken: a delivery within its budget is taken, before the gate.
	Taken     Point = "taken"
	AfterCall Point = "after-call" // the service answered; no receipt yet
	// AfterReceipt: the receipt is stored (for a receipt stored in a batch,
	// the batch's commit is acknowledged); no ack yet.
	AfterReceipt Point = "after-receipt"
	BeforeAck    Point = "before-ack" // just before the ack
)

// Fault points of a receipt batch, passed once per batch (with the first
// delivery of the batch) between AfterCall and AfterReceipt.
const (
	// BatchStaged: the batch's messages before its commit are published;
	// the commit is not.
	BatchStaged Point = "batch-staged"
	// BatchCommitSent: the commit is published too; its ack has not
	// arrived, so nothing of the batch is acked.
	BatchCommitSent Point = "batch-commit-sent"
)

// ErrFaultSpec is returned for a fault specification that does not parse.
var ErrFaultSpec = errors.New("executor: bad fault specification")

// FaultSpec is one injected fault: at Point, either kill the process
// (SIGKILL, as a crash would) or stall for Stall. With Probability 0 it
// fires once, the first time the point is reached, or, with IntentID, every
// time a delivery of that intent reaches it; otherwise each time with that
// probability.
type FaultSpec struct {
	Point       Point
	IntentID    string
	Kill        bool
	Stall       time.Duration
	Probability float64
}

// ParseFault reads POINT[@INTENT_ID]:ACTION[:PROBABILITY], where POINT is
// taken, after-call, after-receipt or before-ack, and ACTION is kill or
// stall=DURATION. With @INTENT_ID the fault is for deliveries of that intent
// only, and fires on every one of them unless a probability is given.
// Examples: "after-call:kill", "before-ack:stall=5s:0.01",
// "taken@intent-0007:kill" (a message that kills every executor taking it).
func ParseFault(spec string) (FaultSpec, error) {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return FaultSpec{}, fmt.Errorf("%w %q: want POINT[@INTENT_ID]:ACTION[:PROBABILITY]", ErrFaultSpec, spec)
	}
	var f FaultSpec
	point, intent, scoped := strings.Cut(parts[0], "@")
	if scoped && intent == "" {
		return FaultSpec{}, fmt.Errorf("%w %q: an empty intent id after @", ErrFaultSpec, spec)
	}
	f.IntentID = intent
	switch p := Point(point); p {
	case Taken, AfterCall, AfterReceipt, BeforeAck:
		f.Point = p
	default:
		return FaultSpec{}, fmt.Errorf("%w %q: point must be taken, after-call, after-receipt or before-ack", ErrFaultSpec, spec)
	}
	switch a := parts[1]; {
	case a == "kill":
		f.Kill = true
	case strings.HasPrefix(a, "stall="):
		d, err := time.ParseDuration(strings.TrimPrefix(a, "stall="))
		if err != nil || d <= 0 {
			return FaultSpec{}, fmt.Errorf("%w %q: stall needs a positive duration such as stall=5s", ErrFaultSpec, spec)
		}
		f.Stall = d
	default:
		return FaultSpec{}, fmt.Errorf("%w %q: action must be kill or stall=DURATION", ErrFaultSpec, spec)
	}
	if len(parts) == 3 {
		p, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || p <= 0 || p > 1 {
			return FaultSpec{}, fmt.Errorf("%w %q: probability must be in (0, 1]", ErrFaultSpec, spec)
		}
		f.Probability = p
	}
	return f, nil
}

// Faults returns a Config.Fault hook that injects the given faults, each
// logged at error level as it fires.
func Faults(specs []FaultSpec, log *slog.Logger) func(Point, uint64, uint64, string) {
	if len(specs) == 0 {
		return nil
	}
	var mu sync.Mutex
	fired := make([]bool, len(specs))
	return func(p Point, seq, delivered uint64, intentID string) {
		for i, f := range specs {
			if f.Point != p || f.IntentID != "" && f.IntentID != intentID {
				continue
			}
			mu.Lock()
			fire := false
			switch {
			case f.IntentID != "" && f.Probability == 0:
				fire = true
			case f.Probability == 0:
				fire, fired[i] = !fired[i], true
			default:
				fire = rand.Float64() < f.Probability
			}
			mu.Unlock()
			if !fire {
				continue
			}
			if f.Kill {
				log.Error("FAULT INJECTED: killing this process", "point", p, "stream_seq", seq, "delivered", delivered, "intent_id", intentID)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal ends the process
			}
			log.Error("FAULT INJECTED: stalling", "point", p, "for", f.Stall, "stream_seq", seq, "delivered", delivered, "intent_id", intentID)
			time.Sleep(f.Stall)
		}
	}
}

// fault calls the Fault hook, if set, at point p of delivery d.
func (e *Executor) fault(p Point, d *delivery) {
	if e.cfg.Fault != nil {
		e.cfg.Fault(p, d.seq, d.delivered, d.id.IntentID)
	}
}
