package proof

import (
	"bytes"
	"errors"
	"testing"
)

func TestATagChangesWithEveryPartAndItsBoundaries(t *testing.T) {
	key := bytes.Repeat([]byte{7}, MinKeyBytes)
	base := Tag(key, "name", "team-a", "intent-1")
	if len(base) != TagHexDigits {
		t.Fatalf("tag %q is %d digits long, want %d", base, len(base), TagHexDigits)
	}
	others := map[string]string{
		"another purpose": Tag(key, "mark", "team-a", "intent-1"),
		"another scope":   Tag(key, "name", "team-b", "intent-1"),
		"another intent":  Tag(key, "name", "team-a", "intent-2"),
		"moved boundary":  Tag(key, "name", "team-ai", "ntent-1"),
		"another key":     Tag(bytes.Repeat([]byte{8}, MinKeyBytes), "name", "team-a", "intent-1"),
	}
	for what, tag := range others {
		if tag == base {
			t.Errorf("%s gives the same tag %q", what, tag)
		}
	}
	if !Valid(key, base, "name", "team-a", "intent-1") {
		t.Error("Valid refuses the tag Tag made")
	}
	if Valid(key, others["another intent"], "name", "team-a", "intent-1") {
		t.Error("Valid accepts another intent's tag")
	}
}

func TestAShortKeyIsRefusedAndNoKeyIsAllowed(t *testing.T) {
	if err := CheckKey(make([]byte, MinKeyBytes-1)); !errors.Is(err, ErrKey) {
		t.Errorf("CheckKey(31 bytes) = %v, want ErrKey", err)
	}
	for _, k := range [][]byte{nil, make([]byte, MinKeyBytes)} {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%d bytes) = %v", len(k), err)
		}
	}
}
