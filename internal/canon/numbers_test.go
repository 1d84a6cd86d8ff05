package canon

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestES6Numbers(t *testing.T) {
	path := filepath.Join(vectorDir, "es6-numbers-10k.csv")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the vectors file has the published SHA-256", func(t *testing.T) {
		const want = "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892"
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("SHA-256 of %s is %s, want %s", path, got, want)
		}
	})
	t.Run("every line is written as ECMAScript writes it", func(t *testing.T) {
		sc := bufio.NewScanner(bytes.NewReader(data))
		lines, failures := 0, 0
		for sc.Scan() {
			lines++
			line := sc.Text()
			hexBits, want, ok := strings.Cut(line, ",")
			if !ok {
				t.Fatalf("line %d: no comma: %q", lines, line)
			}
			bits, err := strconv.ParseUint(hexBits, 16, 64)
			if err != nil {
				t.Fatalf("line %d: %v", lines, err)
			}
			f := math.Float64frombits(bits)
			got, err := AppendNumber(nil, f)
			if err != nil || string(got) != want {
				failures++
				if failures <= 20 {
					t.Errorf("line %d: %s (%v): got %q, %v; want %q", lines, hexBits, f, got, err, want)
				}
				continue
			}
			// The expected text also survives Parse and Encode unchanged.
			back, err := Canonicalize([]byte(want))
			if err != nil || string(back) != want {
				failures++
				if failures <= 20 {
					t.Errorf("line %d: Canonicalize(%q) = %q, %v", lines, want, back, err)
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if lines != 10000 {
			t.Errorf("read %d lines, want 10000", lines)
		}
		if failures > 0 {
			t.Errorf("%d of %d lines failed", failures, lines)
		}
	})
}

func TestAppendNumber(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{"writes zero as 0", 0, "0"},
		{"writes minus zero as 0", math.Copysign(0, -1), "0"},
		{"writes one as 1", 1, "1"},
		{"writes minus one as -1", -1, "-1"},
		{"writes 2^53 in full", 1 << 53, "9007199254740992"},
		{"writes 2^60 with the shortest digits", 1 << 60, "1152921504606847000"},
		{"writes 1e21 with an exponent", 1e21, "1e+21"},
		{"writes 123e18 in full", 123e18, "123000000000000000000"},
		{"writes 0.1 as 0.1", 0.1, "0.1"},
		{"writes 1e-6 in full", 1e-6, "0.000001"},
		{"writes 1.5e-7 with an exponent", 1.5e-7, "1.5e-7"},
		{"writes -1.25e-10 with an exponent", -1.25e-10, "-1.25e-10"},
		{"writes the largest double", math.MaxFloat64, "1.7976931348623157e+308"},
		{"writes the smallest subnormal", math.SmallestNonzeroFloat64, "5e-324"},
		{"writes a fraction with a large integer part", 4.5, "4.5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendNumber([]byte("x"), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "x"+tc.want {
				t.Errorf("got %q, want %q", got, "x"+tc.want)
			}
		})
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		t.Run(fmt.Sprintf("refuses %v", f), func(t *testing.T) {
			got, err := AppendNumber([]byte("x"), f)
			if !errors.Is(err, ErrNumberRange) {
				t.Fatalf("err = %v, want ErrNumberRange", err)
			}
			if string(got) != "x" {
				t.Errorf("dst changed to %q", got)
			}
		})
	}
}

func TestExactNumbersRefusesLiteralsThatJCSWouldRound(t *testing.T) {
	for _, in := range []string{
		`9007199254740993`, `9007199254740992.4`, `333333333.33333329`, `0.30000000000000001`,
		`1e-400`, `-1e-400`, `123456789012345678901234567890`, `[1, 18446744073709551617]`,
	} {
		_, err := Parse([]byte(in), ExactLimits)
		if !errors.Is(err, ErrNumberInexact) {
			t.Errorf("%s: got %v, want ErrNumberInexact", in, err)
		}
		if _, err := DigestExact([]byte(in)); !errors.Is(err, ErrNumberInexact) {
			t.Errorf("DigestExact(%s): got %v, want ErrNumberInexact", in, err)
		}
	}
}

func TestExactNumbersAcceptsEveryNotationOfANumberJCSWritesExactly(t *testing.T) {
	for in, want := range map[string]string{
		`9007199254740992`: `9007199254740992`, `9007199254740991`: `9007199254740991`,
		`1.0`: `1`, `1e2`: `100`, `1E+2`: `100`, `4.50`: `4.5`, `0.1`: `0.1`, `2e-3`: `0.002`,
		`-0`: `0`, `-0.0e5`: `0`, `1E30`: `1e+30`, `0.000000000000000000000000001`: `1e-27`,
		`1.7976931348623157e308`: `1.7976931348623157e+308`, `5e-324`: `5e-324`,
		`100000000000000000000000`: `1e+23`, `0.00001000`: `0.00001`, `12345678901234567`: `12345678901234568`,
	} {
		if in == `12345678901234567` {
			continue // checked below: it is refused
		}
		got, err := CanonicalizeExact([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := CanonicalizeExact([]byte(`12345678901234567`)); !errors.Is(err, ErrNumberInexact) {
		t.Errorf("12345678901234567 (read as 12345678901234568): got %v, want ErrNumberInexact", err)
	}
}

func TestWithoutExactNumbersLiteralsAreRoundedAsRFC8785Says(t *testing.T) {
	got, err := Canonicalize([]byte(`[9007199254740993, 333333333.33333329]`))
	if err != nil || string(got) != `[9007199254740992,333333333.3333333]` {
		t.Fatalf("got %s, %v", got, err)
	}
}

func TestTheCanonicalFormOfEveryES6VectorIsAcceptedByExactNumbers(t *testing.T) {
	f, err := os.Open(filepath.Join(vectorDir, "es6-numbers-10k.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		hexBits, written, _ := strings.Cut(sc.Text(), ",")
		bits, err := strconv.ParseUint(hexBits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		v := math.Float64frombits(bits)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		// The vector's expected text, and Go's own shortest form, both read
		// back exactly.
		for _, in := range []string{written, strconv.FormatFloat(v, 'g', -1, 64), strconv.FormatFloat(v, 'e', -1, 64)} {
			if got, err := CanonicalizeExact([]byte(in)); err != nil || string(got) != written {
				t.Fatalf("line %d: %s: got %s, %v; want %s", n, in, got, err, written)
			}
		}
	}

	for _, in := range []string{`333333333.3333333`, `1e+21`, `1e-7`, `0.000001`, `-1.5e-300`, `4.35`, `295147905179352830000`} {
		got, err := CanonicalizeExact([]byte(in))
		if err != nil || string(got) != in {
			t.Errorf("%s: got %s, %v", in, got, err)
		}
	}
}

// FuzzExactNumbers checks ExactNumbers against math/big: a number literal is
// accepted exactly when its rational value equals that of the shortest
// decimal of the double it reads as.
func FuzzExactNumbers(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.0", "1e2", "0.1", "9007199254740993", "9007199254740992.4",
		"333333333.33333329", "1e-400", "5e-324", "1.7976931348623157e308", "12345678901234567"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := Parse([]byte(in), ExactLimits)
		loose, lerr := Parse([]byte(in), DefaultLimits)
		x, isNumber := loose.(float64)
		if lerr != nil || !isNumber {
			if err == nil && lerr != nil {
				t.Fatalf("%q: accepted exactly, refused loosely: %v", in, lerr)
			}
			return
		}
		if mantissa, exp, ok := splitExponent(strings.TrimSpace(in)); ok && exp < -(5000+len(mantissa)) {
			// Below 10^-5000 (math/big would take milliseconds to say
			// so): the number reads as 0, which is exact only for a zero
			// mantissa. Above 10^5000 the loose parse refused it already.
			if zero := strings.Trim(mantissa, "-+0.") == ""; zero != (err == nil) {
				t.Fatalf("%q: a zero mantissa %v; Parse with ExactNumbers: %v, %v", in, zero, v, err)
			}
			return
		}
		lit, ok := new(big.Rat).SetString(strings.TrimSpace(in))
		if !ok {
			return // math/big refuses exponents of millions; Parse has read it already
		}
		want, _ := new(big.Rat).SetString(strconv.FormatFloat(x, 'e', -1, 64))
		exact := lit.Cmp(want) == 0
		if exact != (err == nil) {
			t.Fatalf("%q: exact by math/big: %v; Parse with ExactNumbers: %v, %v", in, exact, v, err)
		}
		if err != nil && !errors.Is(err, ErrNumberInexact) {
			t.Fatalf("%q: %v, want ErrNumberInexact", in, err)
		}
	})
}

// splitExponent splits a JSON number into its mantissa and its exponent's
// value; ok is false when it has no exponent or the exponent does not fit
// an int.
func splitExponent(num string) (mantissa string, exp int, ok bool) {
	i := strings.IndexAny(num, "eE")
	if i < 0 {
		return num, 0, false
	}
	e, err := strconv.Atoi(strings.TrimPrefix(num[i+1:], "+"))
	if err != nil {
		return num, 0, false
	}
	return num[:i], e, true
}
