package provider

import (
	"fmt"
	"testing"
	"time"
)

// sendAll sends a create call for each key and fails unless each has the
// outcome want.
func sendAll(t *testing.T, st *Store, keys []keyID, want string) {
	t.Helper()
	for _, k := range keys {
		resp, err := st.Create(ctxT(t), scoped(k.scope, k.intent, "task of "+k.intent))
		if err != nil || resp.Outcome != want {
			t.Fatalf("send %v: %+v, %v, want %s", k, resp, err, want)
		}
	}
}

func TestTheIntentFilterHoldsEveryStoredKeyAndFewOthers(t *testing.T) {
	var keys []keyID
	for i := range 300 {
		keys = append(keys, keyID{[]string{"default", "team-a"}[i%2], fmt.Sprintf("intent-%04d", i)})
	}
	t.Run("keys created in earlier groups are replayed, not created again", func(t *testing.T) {
		st := openStore(t, t.TempDir(), Options{CompactEvery: -1})
		sendAll(t, st, keys, OutcomeCreated)
		sendAll(t, st, keys, OutcomeReplayed)
	})
	t.Run("a reopened store's filter holds every key it stored", func(t *testing.T) {
		dir := t.TempDir()
		st, err := Open(dir, Options{Logger: quietLogger(), CompactEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		sendAll(t, st, keys, OutcomeCreated)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st = openStore(t, dir, Options{CompactEvery: -1})
		if st.intents.built != len(keys) {
			t.Errorf("filter built with %d keys, want %d", st.intents.built, len(keys))
		}
		sendAll(t, st, keys, OutcomeReplayed)
	})
	t.Run("a filter built again between groups holds every key and forgets compacted ones", func(t *testing.T) {
		clock := newTestClock()
		st := openStore(t, t.TempDir(), Options{Clock: clock.Now, KeyClockAllowance: time.Minute, KeyMargin: -1, CompactEvery: -1})
		expired := keyID{"default", "intent-expiring"}
		if _, err := st.Create(ctxT(t), expiring(expired.scope, expired.intent, clock.Now().Add(time.Minute))); err != nil {
			t.Fatal(err)
		}
		sendAll(t, st, keys, OutcomeCreated)
		clock.Advance(time.Hour)
		if r := compact(t, st); r.KeysCompacted != 1 {
			t.Fatalf("compacted %+v, want the one expired key", r)
		}
		old := st.intents
		old.added = len(old.bits)*64/filterBitsPerKey + 1 // full: the next group builds it again
		sendAll(t, st, keys, OutcomeReplayed)
		if st.intents == old || st.intents.built != len(keys) {
			t.Fatalf("filter not built again from the %d stored keys (built %d)", len(keys), st.intents.built)
		}
		if st.intents.mayHold(expired.scope, expired.intent) {
			t.Errorf("the rebuilt filter still holds the compacted key")
		}
		resp, err := st.Create(ctxT(t), expiring(expired.scope, expired.intent, clock.Now().Add(time.Minute)))
		if err != nil || resp.Outcome != OutcomeCreated {
			t.Fatalf("the compacted key sent again: %+v, %v, want created", resp, err)
		}
	})
	t.Run("a key never stored is filtered out nearly always", func(t *testing.T) {
		st := openStore(t, t.TempDir(), Options{CompactEvery: -1})
		sendAll(t, st, keys, OutcomeCreated)
		const tries = 20000
		passed := 0
		for i := range tries {
			if st.intents.mayHold("default", fmt.Sprintf("never-%d", i)) {
				passed++
			}
		}
		if passed > tries/100 {
			t.Errorf("%d of %d unknown keys pass the filter, want at most 1%%", passed, tries)
		}
	})
}
