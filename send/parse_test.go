package send_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/send"
)

func TestAStoredEnvelopeIsSentAgainByteForByteAndAnythingElseIsRefused(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	stored := s.Original.Envelope()
	env, err := send.ParseEnvelope(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(env.Bytes(), stored) {
		t.Fatalf("the parsed envelope's bytes differ from the stored ones")
	}
	if got := env.IntentID(); got != "intent-0001" {
		t.Fatalf("intent %q, want intent-0001", got)
	}
	for name, data := range map[string][]byte{
		"not JSON":                    []byte(`{`),
		"a document, not an envelope": s.Original.Request,
		"another schema version":      bytes.Replace(stored, []byte(`task-envelope.v1`), []byte(`task-envelope.v2`), 1),
	} {
		if _, err := send.ParseEnvelope(data); !errors.Is(err, send.ErrNotEnvelope) {
			t.Errorf("%s: %v, want ErrNotEnvelope", name, err)
		}
	}
}
