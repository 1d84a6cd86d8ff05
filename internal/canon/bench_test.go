package canon

import "testing"

// benchDoc is a document of about 1 KiB with nested objects, arrays, numbers
// and non-ASCII text, like an approved action.
var benchDoc = []byte(`{
  "intent_id": "int_01JH6Q8V6W3K9Z2B5N7M4C1D0E",
  "action": "task.create",
  "request": {
    "task": {
      "title": "Réunion d'équipe – préparer l'ordre du jour 🗓️",
      "assignee_person_ref": "person:8f14e45f-ceea-467f-a0e6-b2f1c3d4e5f6",
      "due_at": "2025-03-14T09:30:00+01:00",
      "priority": 2,
      "estimate_hours": 1.5,
      "labels": ["équipe", "planning", "会议", "urgent"]
    },
    "notify": {"email": true, "sms": false, "channels": ["#général", "#ops"]}
  },
  "evidence": [
    {"source": "mail", "quote": "Peux-tu préparer l'ordre du jour pour vendredi ? Merci !", "score": 0.92, "offset": 1532},
    {"source": "chat", "quote": "Ja, das Meeting ist am Freitag um 9:30 — bitte einplanen.", "score": 0.87, "offset": 77},
    {"source": "calendar", "quote": "Réunion hebdomadaire \"équipe\"\nSalle 3", "score": 1e-3, "offset": 0}
  ],
  "approval": {
    "approved_by": "person:1c2d3e4f-5a6b-7c8d-9e0f-a1b2c3d4e5f6",
    "approved_at": "2025-03-12T16:04:05.123Z",
    "policy": {"max_retries": 5, "backoff_ms": [100, 200, 400, 800, 1600], "jitter": 0.25},
    "comment": "OK pour moi 👍"
  },
  "metadata": {"client": "sendtwice-cli/0.1.0", "locale": "fr-FR", "tz": "Europe/Paris", "trace": null}
}`)

// benchBytes runs f over benchDoc, reporting allocations and bytes per second.
func benchBytes(b *testing.B, f func([]byte) error) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if err := f(benchDoc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	benchBytes(b, func(doc []byte) error {
		_, err := Canonicalize(doc)
		return err
	})
}

func BenchmarkDigest(b *testing.B) {
	benchBytes(b, func(doc []byte) error {
		_, err := Digest(doc)
		return err
	})
}

func BenchmarkParse(b *testing.B) {
	benchBytes(b, func(doc []byte) error {
		_, err := Parse(doc, DefaultLimits)
		return err
	})
}

func BenchmarkEncode(b *testing.B) {
	v, err := Parse(benchDoc, DefaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(v); err != nil {
			b.Fatal(err)
		}
	}
}
