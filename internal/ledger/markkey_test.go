package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func TestExecutorsStartingAtOnceAgreeOnOneMarkKey(t *testing.T) {
	js := testenv.JetStream(t)
	_ = testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()
	if _, err := ledger.MarkKey(ctx, js, false); !errors.Is(err, ledger.ErrNoMarkKey) {
		t.Fatalf("reading a mark key before any executor made one: %v, want ErrNoMarkKey", err)
	}
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := ledger.MarkKey(ctx, js, true)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i, k := range keys {
		if len(k) != 32 || !bytes.Equal(k, keys[0]) {
			t.Fatalf("executor %d got a %d-byte key that differs from executor 0's", i, len(k))
		}
	}
	read, err := ledger.MarkKey(ctx, js, false)
	if err != nil || !bytes.Equal(read, keys[0]) {
		t.Fatalf("reading the key back: %v (same key: %v)", err, bytes.Equal(read, keys[0]))
	}
	entries, err := ledger.Entries(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("Entries lists the mark key as an entry: %+v", entries)
	}
}

func TestAMarkKeyWithoutTheBucketSaysHowToProvisionIt(t *testing.T) {
	js := testenv.JetStream(t)
	if _, err := ledger.MarkKey(context.Background(), js, true); !errors.Is(err, ledger.ErrNoBucket) {
		t.Fatalf("MarkKey without the bucket: %v, want ErrNoBucket", err)
	}
}

func TestAStoredMarkKeyThatIsTooShortIsRefused(t *testing.T) {
	js := testenv.JetStream(t)
	_ = testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, ledger.MarkKeyKey, []byte(`{"key":"c2hvcnQ="}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.MarkKey(ctx, js, true); err == nil {
		t.Fatal("a 5-byte stored mark key was taken")
	}
}
