package gate_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/sign"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonMarshal(b *testing.B, v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func approveOptions(key *sign.Key, signed bool, now time.Time) approve.Options {
	o := approve.Options{ID: "approval-0001"}
	if signed {
		o.Key, o.At, o.Lifetime = key, now.Add(-time.Minute), time.Hour
	}
	return o
}
