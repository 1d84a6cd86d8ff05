package provider

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"
)

// One intent has one spelling: "café" with U+00E9 (NFC) and with e +
// U+0301 (NFD) would be two intent ids, so two tasks. The second spelling
// is refused with a 400 naming intent_id, and nothing is recorded.
func TestAnIntentIDNotInNFCIsRefusedAndNothingIsRecorded(t *testing.T) {
	const nfc, nfd = "caf\u00e9", "cafe\u0301"
	h := newHarness(t, Options{}, ServiceConfig{})
	if _, err := h.client.Create(ctxT(t), newRequest(nfc, "fine")); err != nil {
		t.Fatalf("the NFC spelling: %v", err)
	}
	for _, tc := range []struct {
		name string
		id   string
	}{
		{"the NFD spelling of an intent id is refused", nfd},
		{"a combining mark out of canonical order is refused", "a\u0301\u0323"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := validateIntentID(tc.id); err == nil || !strings.Contains(err.Error(), "intent_id") {
				t.Fatalf("validateIntentID(%q) = %v, want a refusal naming intent_id", tc.id, err)
			}
			body := `{"intent_id":"` + tc.id + `","request_digest":"` + digestOf("x") + `","task":{"title":"x"}}`
			msg, err := h.nc.RequestWithContext(ctxT(t), SubjectCreate, []byte(body))
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
			if code != "400" || !strings.Contains(desc, "intent_id") || !strings.Contains(desc, "NFC") {
				t.Errorf("reply code %q description %q; want 400 naming intent_id and NFC", code, desc)
			}
			if got, want := h.st.Stats(), counts(1, 1, 1); got != want {
				t.Errorf("counts %+v, want %+v unchanged", got, want)
			}
		})
	}
}
