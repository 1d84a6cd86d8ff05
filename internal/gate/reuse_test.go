package gate_test

import (
	"reflect"
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
