package executor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func TestFaultSpecificationsParseOrAreRefusedWithAReason(t *testing.T) {
	for _, c := range []struct {
		spec string
		want executor.FaultSpec
		bad  bool
	}{
		{spec: "after-call:kill", want: executor.FaultSpec{Point: executor.AfterCall, Kill: true}},
		{spec: "before-ack:stall=5s:0.01", want: executor.FaultSpec{Point: executor.BeforeAck, Stall: 5 * time.Second, Probability: 0.01}},
		{spec: "taken@intent-0007:kill", want: executor.FaultSpec{Point: executor.Taken, IntentID: "intent-0007", Kill: true}},
		{spec: "taken@:kill", bad: true},
		{spec: "nowhere:kill", bad: true},
		{spec: "taken:explode", bad: true},
		{spec: "taken:kill:2", bad: true},
		{spec: "taken", bad: true},
	} {
		name := c.spec + " parses"
		if c.bad {
			name = c.spec + " is refused"
		}
		t.Run(name, func(t *testing.T) {
			got, err := executor.ParseFault(c.spec)
			if c.bad {
				if !errors.Is(err, executor.ErrFaultSpec) {
					t.Fatalf("err %v, want ErrFaultSpec", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// A fault for one intent fires on every delivery of that intent and never
// on another's.
func TestAFaultForOneIntentFiresOnEachOfItsDeliveriesOnly(t *testing.T) {
	f, err := executor.ParseFault("taken@intent-0007:stall=50ms")
	if err != nil {
		t.Fatal(err)
	}
	hook := executor.Faults([]executor.FaultSpec{f}, testenv.Logger())
	took := func(intent string) time.Duration {
		start := time.Now()
		hook(executor.Taken, 1, 1, intent)
		return time.Since(start)
	}
	for i := range 3 {
		if d := took("intent-0007"); d < 50*time.Millisecond {
			t.Fatalf("delivery %d of the intent did not stall", i+1)
		}
	}
	if d := took("intent-0008"); d >= 50*time.Millisecond {
		t.Fatalf("another intent's delivery stalled %s", d)
	}
}
