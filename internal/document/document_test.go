package document_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
)

func candidateWithStartMS(t *testing.T, literal string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "seed", "candidate.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Replace(data, []byte(`"start_ms": 812000`), []byte(`"start_ms": `+literal), 1)
	if bytes.Equal(out, data) {
		t.Fatal("the seed candidate has no start_ms of 812000")
	}
	return out
}

func decodeCandidate(data []byte) error {
	v, err := document.Parse(data)
	if err != nil {
		return err
	}
	_, err = document.DecodeCandidate("$", v)
	return err
}

func TestAnIntegerFieldRefusesNumbersThatADoubleCannotHoldExactly(t *testing.T) {
	for literal, want := range map[string]error{
		"9007199254740993":   canon.ErrNumberInexact,
		"9007199254740992.4": canon.ErrNumberInexact,
		"9007199254740992":   document.ErrValue,
		"9007199254740994":   document.ErrValue,
	} {
		err := decodeCandidate(candidateWithStartMS(t, literal))
		if !errors.Is(err, want) {
			t.Errorf("start_ms %s: got %v, want %v", literal, err, want)
		}
	}
	for _, literal := range []string{"812000.0", "8.12e5", "0.0"} {
		if err := decodeCandidate(candidateWithStartMS(t, literal)); err != nil {
			t.Errorf("start_ms %s: %v", literal, err)
		}
	}
}
