package gate_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/internal/gate"
)

// TestAVerdictStaysWhatItWasAfterLaterChecks checks envelopes one after
// another, refused ones among them, as an executor does: the gate gives
// each envelope's parsed objects back for the next check, so a verdict
// must hold nothing of them. Each verdict, kept, must still equal the
// verdict of its envelope checked alone in a fresh check, and checking an
// envelope again must reach the same verdict.
func TestAVerdictStaysWhatItWasAfterLaterChecks(t *testing.T) {
	s := seed(t)
	envelopes := [][]byte{
		s.Original.Envelope(), s.Changed.Envelope(), []byte(`{"schema_version":"task-envelope.v1"}`),
		s.NewIntent.Envelope(), []byte(`{"not":"an envelope"`), s.Original.Envelope(),
	}
	type outcome struct {
		verdict *gate.Verdict
		err     string
	}
	check := func(env []byte) outcome {
		v, err := gate.CheckBindings(env)
		if err != nil {
			return outcome{err: err.Error()}
		}
		return outcome{verdict: v}
	}
	kept := make([]outcome, len(envelopes))
	for i, env := range envelopes {
		kept[i] = check(env)
	}
	for round := range 3 {
		for i, env := range envelopes {
			again := check(env)
			if !reflect.DeepEqual(again, kept[i]) {
				t.Fatalf("round %d, envelope %d: checked again %+v, first %+v", round, i, again, kept[i])
			}
		}
	}
	if kept[0].verdict == nil || kept[2].err == "" || kept[4].err == "" {
		t.Fatalf("the seed envelopes must pass and the broken ones be refused: %+v", kept)
	}
}

// TestChecksRunningAtOnceReachTheirOwnVerdicts checks envelopes from many
// goroutines at once, as an executor's handlers do: the parsed objects and
// the decoders' paths are shared between checks, and each check must still
// reach its own envelope's verdict (run it with -race).
func TestChecksRunningAtOnceReachTheirOwnVerdicts(t *testing.T) {
	s := seed(t)
	envelopes := [][]byte{s.Original.Envelope(), s.Changed.Envelope(), s.NewIntent.Envelope()}
	want := make([]*gate.Verdict, len(envelopes))
	for i, env := range envelopes {
		v, err := gate.CheckBindings(env)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = v
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(envelopes)
				v, err := gate.CheckBindings(envelopes[i])
				if err != nil || !reflect.DeepEqual(v, want[i]) {
					errs <- fmt.Sprintf("goroutine %d, check %d of envelope %d: %+v, %v", g, n, i, v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
