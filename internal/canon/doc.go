// Package canon turns JSON documents into their RFC 8785 (JSON Canonicalization
// Scheme, JCS) form and computes the digests that identify them.
//
// A digest names the content of an approved action: two documents that differ
// only in member order or insignificant white space have the same canonical
// form and therefore the same digest, while any difference in content gives a
// different one. The digest format is
//
//	"sha256:" + lower-case hex of SHA-256(JCS(document))
//
// # What the package must never do
//
// The package must never guess. A document that JCS cannot represent
// faithfully is refused with an error, never repaired, truncated or
// normalised into something that merely looks similar, because two parties
// that guess differently would compute different digests for "the same"
// action, or worse, the same digest for different ones. Parse therefore
// refuses:
//
//   - empty input, input holding only white space, and syntax errors (including
//     a leading byte order mark, comments, NaN and Infinity literals, leading
//     zeros, '+' signs and bare decimal points);
//   - data after the JSON value;
//   - duplicate member names, compared exactly after unescaping;
//   - invalid UTF-8 anywhere in the input, and lone surrogates in \u escapes;
//   - numbers whose magnitude overflows an IEEE-754 double, such as 1e400;
//   - input larger than Limits.MaxBytes or nested deeper than Limits.MaxDepth.
//
// Numbers are read as IEEE-754 doubles, as RFC 8785 and I-JSON (RFC 7493)
// prescribe: a number with more digits than a double holds is rounded to the
// nearest double (333333333.33333329 becomes 333333333.3333333), and a number
// too small to be represented becomes 0. Both are the documented JCS number
// model, not a guess. With Limits.ExactNumbers (ExactLimits,
// CanonicalizeExact, DigestExact; the project's documents and `publisher
// digest` use it) such literals are refused instead (ErrNumberInexact): a
// literal must denote exactly the number JCS writes for it, whatever its
// notation ("1.0", "1e2" and "4.50" pass as 1, 100 and 4.5), so that two
// different literals never share a digest. Code points that Unicode calls noncharacters (such as
// U+FFFF) are kept as they are: JCS represents them faithfully.
//
// Encode accepts only the value types Parse produces (nil, bool, float64,
// string, []any and map[string]any) and refuses anything else, including
// NaN and infinities, strings that are not valid UTF-8, and nesting deeper
// than 10,000 levels (which also stops cyclic values).
//
// All errors wrap one of the package's sentinel errors, so callers can test
// them with errors.Is; Parse reports an *Error with the byte offset and the
// path of the offending value.
//
// It must never import anything but the standard library: every document,
// signature and gate decision rests on these bytes, so they depend on
// nothing that could change them.
package canon
