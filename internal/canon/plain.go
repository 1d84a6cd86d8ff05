package canon

// Eight bytes at a time: every byte of a word set to b is b * ones.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialIn reports whether the eight bytes of w hold one that a string
// cannot hold as it is (see plainByte): a control byte (below 0x20), '"',
// '\\', or a byte of a multi-byte UTF-8 sequence (0x80 and above). Each term
// is the classic test for a byte below n, or equal to zero, in a word,
// exact as a yes or no.
func specialIn(w uint64) bool {
	control := (w - 0x20*ones) &^ w
	quote := w ^ '"'*ones
	backslash := w ^ '\\'*ones
	return (control|(quote-ones)&^quote|(backslash-ones)&^backslash|w)&highs != 0
}

// plainEnd returns the end of the run of plain bytes that starts at i in s:
// the index of the first byte from i on that plainByte refuses, or len(s).
// The parser scans bytes and the encoder strings: each gets its own copy.
func plainEnd[T string | []byte](s T, i int) int {
	for ; i+8 <= len(s); i += 8 {
		_ = s[i+7]
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if specialIn(w) {
			break
		}
	}
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	return i
}
