package canon

import (
	"math/rand/v2"
	"testing"
)

// plainEndByByte is plainEnd one byte at a time.
func plainEndByByte(s string, i int) int {
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	return i
}

// Every byte value, at every place of a run of up to 20 plain bytes, ends
// the run exactly where the byte-by-byte scan ends it.
func TestARunOfPlainBytesEndsAtTheFirstByteAStringCannotHoldAsItIs(t *testing.T) {
	for b := range 256 {
		for n := range 20 {
			for at := 0; at <= n; at++ {
				buf := make([]byte, n+1)
				for i := range buf {
					buf[i] = 'a' + byte(i%26)
				}
				buf[at] = byte(b)
				s := string(buf)
				for from := 0; from <= at; from++ {
					if got, want := plainEnd(s, from), plainEndByByte(s, from); got != want {
						t.Fatalf("byte %#x at %d of %q from %d: plainEnd = %d, want %d", b, at, s, from, got, want)
					}
					if got, want := plainEnd(buf, from), plainEndByByte(s, from); got != want {
						t.Fatalf("byte %#x at %d of %q from %d: plainEnd of the bytes = %d, want %d", b, at, s, from, got, want)
					}
				}
			}
		}
	}
}

// FuzzPlainEnd holds plainEnd, on a string and on its bytes, to the byte-by-byte scan.
func FuzzPlainEnd(f *testing.F) {
	f.Add("sha256:0123456789abcdef", uint8(0))
	f.Add("caf\u00e9 \"quoted\" \\ tab\t", uint8(3))
	rng := rand.New(rand.NewPCG(1, 1))
	for range 8 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		f.Add(string(b), uint8(rng.IntN(8)))
	}
	f.Fuzz(func(t *testing.T, s string, from uint8) {
		i := int(from)
		if i > len(s) {
			i = len(s)
		}
		want := plainEndByByte(s, i)
		if got := plainEnd(s, i); got != want {
			t.Fatalf("plainEnd(%q, %d) = %d, want %d", s, i, got, want)
		}
		if got := plainEnd([]byte(s), i); got != want {
			t.Fatalf("plainEnd(%q, %d) = %d, want %d", s, i, got, want)
		}
	})
}
