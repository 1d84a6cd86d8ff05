package canon

import "strings"

// refusal is a document Parse must refuse, and the sentinel it must wrap.
type refusal struct {
	name string
	in   string
	want error
}

// refusals is shared by the tests and the fuzz seed corpora.
var refusals = []refusal{
	// Empty input.
	{"refuses empty input", "", ErrEmpty},
	{"refuses input holding only a space", " ", ErrEmpty},
	{"refuses input holding only white space", " \t\r\n ", ErrEmpty},

	// Duplicate member names.
	{"refuses a duplicate member name", `{"a":1,"a":2}`, ErrDuplicateName},
	{"refuses a duplicate member name spelled with an escape", `{"a":1,"\u0061":2}`, ErrDuplicateName},
	{"refuses a duplicate member name with equal values", `{"a":1,"a":1}`, ErrDuplicateName},
	{"refuses a duplicate member name in a nested object", `{"x":[{"b":true,"c":null,"b":false}]}`, ErrDuplicateName},
	{"refuses a duplicate empty member name", `{"":1,"":2}`, ErrDuplicateName},
	{"refuses a duplicate non-ASCII member name written two ways", `{"é":1,"\u00e9":2}`, ErrDuplicateName},
	{"refuses a duplicate surrogate-pair member name written two ways", `{"😂":1,"\ud83d\ude02":2}`, ErrDuplicateName},

	// Invalid UTF-8.
	{"refuses a 0xff byte in a string", "\"a\xffb\"", ErrInvalidUTF8},
	{"refuses a truncated two-byte sequence in a string", "\"\xc3\"", ErrInvalidUTF8},
	{"refuses an overlong encoding in a string", "\"\xc0\xaf\"", ErrInvalidUTF8},
	{"refuses a UTF-8 encoded surrogate in a string", "\"\xed\xa0\x80\"", ErrInvalidUTF8},
	{"refuses a code point above U+10FFFF in a string", "\"\xf4\x90\x80\x80\"", ErrInvalidUTF8},
	{"refuses invalid UTF-8 in an escaped string", "\"\\n\xff\"", ErrInvalidUTF8},
	{"refuses invalid UTF-8 in a member name", "{\"\xfe\":1}", ErrInvalidUTF8},
	{"refuses invalid UTF-8 between values", "[1,\xff]", ErrInvalidUTF8},
	{"refuses invalid UTF-8 at the start", "\xff", ErrInvalidUTF8},
	{"refuses invalid UTF-8 after the value", "{}\xff", ErrInvalidUTF8},
	{"refuses invalid UTF-8 after white space that follows the value", "1 \x80", ErrInvalidUTF8},

	// Lone surrogates.
	{"refuses a lone high surrogate", `"\ud800"`, ErrLoneSurrogate},
	{"refuses a lone high surrogate followed by a letter", `"\ud83dx"`, ErrLoneSurrogate},
	{"refuses a high surrogate followed by a non-surrogate escape", `"\ud83d\u0041"`, ErrLoneSurrogate},
	{"refuses two high surrogates", `"\udbff\udbff"`, ErrLoneSurrogate},
	{"refuses a high surrogate followed by another escape", `"\ud83d\n"`, ErrLoneSurrogate},
	{"refuses a lone low surrogate", `"\udc00"`, ErrLoneSurrogate},
	{"refuses a lone low surrogate in upper case", `"\uDFFF"`, ErrLoneSurrogate},
	{"refuses a low surrogate before a high surrogate", `"\ude02\ud83d"`, ErrLoneSurrogate},
	{"refuses a lone surrogate in a member name", `{"\ud800":1}`, ErrLoneSurrogate},

	// Numbers outside IEEE-754 double.
	{"refuses 1e400", `1e400`, ErrNumberRange},
	{"refuses -1e400", `-1e400`, ErrNumberRange},
	{"refuses 1E400 in an array", `[1E400]`, ErrNumberRange},
	{"refuses a number just above the largest double", `1.8e308`, ErrNumberRange},
	{"refuses a number with a huge exponent", `1e99999999999999999999`, ErrNumberRange},
	{"refuses an integer with 400 digits", "1" + strings.Repeat("0", 400), ErrNumberRange},

	// Syntax.
	{"refuses a leading byte order mark", "\xef\xbb\xbf{}", ErrSyntax},
	{"refuses an unescaped line feed in a string", "\"a\nb\"", ErrSyntax},
	{"refuses an unescaped tab in a string", "\"a\tb\"", ErrSyntax},
	{"refuses an unescaped NUL in a string", "\"\x00\"", ErrSyntax},
	{"refuses an unescaped unit separator in a member name", "{\"\x1f\":1}", ErrSyntax},
	{"refuses a leading zero", `01`, ErrSyntax},
	{"refuses a negative number with a leading zero", `-01`, ErrSyntax},
	{"refuses a double zero", `00`, ErrSyntax},
	{"refuses a leading zero in an array", `[007]`, ErrSyntax},
	{"refuses a plus sign", `+1`, ErrSyntax},
	{"refuses a bare decimal point before digits", `.5`, ErrSyntax},
	{"refuses a decimal point without digits after it", `1.`, ErrSyntax},
	{"refuses a decimal point followed by an exponent", `1.e5`, ErrSyntax},
	{"refuses an exponent without digits", `1e`, ErrSyntax},
	{"refuses a signed exponent without digits", `1e+`, ErrSyntax},
	{"refuses a lone minus sign", `-`, ErrSyntax},
	{"refuses a minus sign before a decimal point", `-.5`, ErrSyntax},
	{"refuses NaN", `NaN`, ErrSyntax},
	{"refuses NaN in an array", `[NaN]`, ErrSyntax},
	{"refuses Infinity", `Infinity`, ErrSyntax},
	{"refuses -Infinity", `-Infinity`, ErrSyntax},
	{"refuses Infinity as a member value", `{"a":Infinity}`, ErrSyntax},
	{"refuses a misspelt true", `tru`, ErrSyntax},
	{"refuses a capitalised True", `True`, ErrSyntax},
	{"refuses a truncated null", `nul`, ErrSyntax},
	{"refuses undefined", `undefined`, ErrSyntax},
	{"refuses a trailing comma in an array", `[1,]`, ErrSyntax},
	{"refuses a trailing comma in an object", `{"a":1,}`, ErrSyntax},
	{"refuses a leading comma in an array", `[,1]`, ErrSyntax},
	{"refuses a missing comma in an array", `[1 2]`, ErrSyntax},
	{"refuses a missing comma in an object", `{"a":1 "b":2}`, ErrSyntax},
	{"refuses an unquoted member name", `{a:1}`, ErrSyntax},
	{"refuses a single-quoted member name", `{'a':1}`, ErrSyntax},
	{"refuses a single-quoted string", `'a'`, ErrSyntax},
	{"refuses a missing colon", `{"a" 1}`, ErrSyntax},
	{"refuses a missing member value", `{"a":}`, ErrSyntax},
	{"refuses a non-string member name", `{1:1}`, ErrSyntax},
	{"refuses an unknown escape", `"\x41"`, ErrSyntax},
	{"refuses a short unicode escape", `"\u12"`, ErrSyntax},
	{"refuses a unicode escape with a non-hex digit", `"\u12G4"`, ErrSyntax},
	{"refuses a backslash at the end of input", `"\`, ErrSyntax},
	{"refuses an unterminated string", `"abc`, ErrSyntax},
	{"refuses an unterminated escaped string", `"a\"`, ErrSyntax},
	{"refuses an unclosed array", `[`, ErrSyntax},
	{"refuses an unclosed object", `{`, ErrSyntax},
	{"refuses an object cut after a member name", `{"a"`, ErrSyntax},
	{"refuses an array cut after a value", `[1`, ErrSyntax},
	{"refuses a block comment", `/* c */ 1`, ErrSyntax},
	{"refuses a line comment", "// c\n1", ErrSyntax},
	{"refuses a form feed as white space", "\f1", ErrSyntax},
	{"refuses a vertical tab as white space", "\v1", ErrSyntax},
	{"refuses a no-break space as white space", "\u00a01", ErrSyntax},
	{"refuses an unescaped control character outside strings", "[\x00]", ErrSyntax},
	{"refuses a mismatched bracket", `[1}`, ErrSyntax},

	// Trailing data.
	{"refuses two objects", `{} {}`, ErrTrailingData},
	{"refuses two numbers", `1 2`, ErrTrailingData},
	{"refuses two strings", `"a""b"`, ErrTrailingData},
	{"refuses an extra closing bracket", `[]]`, ErrTrailingData},
	{"refuses a word after null", `null x`, ErrTrailingData},
	{"refuses a NUL after the value", "{}\x00", ErrTrailingData},
	{"refuses a comma after the value", `1,`, ErrTrailingData},
	{"refuses a hexadecimal number as 0 followed by data", `0x10`, ErrTrailingData},

	// Limits.
	{"refuses an array nested 65 deep", strings.Repeat("[", 65) + strings.Repeat("]", 65), ErrTooDeep},
	{"refuses an object nested 65 deep", strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65), ErrTooDeep},
	{"refuses an unclosed array nested 100000 deep", strings.Repeat("[", 100000), ErrTooDeep},
	{"refuses input one byte over 1 MiB", `"` + strings.Repeat("a", 1<<20-1) + `"`, ErrTooLarge},
}

// acceptance is a document Parse must accept, and its canonical form.
type acceptance struct {
	name string
	in   string
	want string
}

var acceptances = []acceptance{
	{"accepts white space around the value", " \t\r\n{ \"a\" : [ 1 , 2 ] }\n", `{"a":[1,2]}`},
	{"writes zero as 0", `0`, `0`},
	{"writes minus zero as 0", `-0`, `0`},
	{"writes minus zero with a fraction as 0", `-0.0e5`, `0`},
	{"writes 1E2 as 100", `1E2`, `100`},
	{"writes 1e21 with an exponent", `1e21`, `1e+21`},
	{"writes 1e20 in full", `1e20`, `100000000000000000000`},
	{"writes 1e-7 with an exponent", `1e-7`, `1e-7`},
	{"writes 1e-6 in full", `1e-6`, `0.000001`},
	{"rounds a number with more digits than a double holds", `333333333.33333329`, `333333333.3333333`},
	{"rounds an integer above 2^53 to the nearest double", `9007199254740993`, `9007199254740992`},
	{"writes the largest double", `1.7976931348623157e308`, `1.7976931348623157e+308`},
	{"writes the smallest subnormal double", `5e-324`, `5e-324`},
	{"writes a number too small for a double as 0", `1e-400`, `0`},
	{"accepts a zero with a huge exponent", `0e99999999999999999999`, `0`},
	{"accepts literals", `[true,false,null]`, `[true,false,null]`},
	{"writes an escaped NUL as \\u0000", `"\u0000"`, `"\u0000"`},
	{"writes control characters in lower-case hex", `"\u001F\u000B"`, `"\u001f\u000b"`},
	{"writes short escapes for b f n r t", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
	{"unescapes a solidus", `"\/"`, `"/"`},
	{"writes DEL as it is", "\"\x7f\"", "\"\x7f\""},
	{"unescapes DEL", `"\u007f"`, "\"\x7f\""},
	{"writes U+2028 as it is", `"\u2028"`, "\"\u2028\""},
	{"writes a surrogate pair as UTF-8", `"\uD83D\uDE02"`, `"😂"`},
	{"keeps a noncharacter", `"\uffff"`, "\"\uffff\""},
	{"keeps U+FFFD written literally", "\"\uFFFD\"", "\"\uFFFD\""},
	{"escapes quote and backslash", `"\"\\"`, `"\"\\"`},
	{"accepts empty containers", `[{},[],""]`, `[{},[],""]`},
	{"accepts an array nested 64 deep", strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 64) + strings.Repeat("]", 64)},
	{"sorts member names by UTF-16 code units", `{"\uffff":1,"😂":2,"a":3}`, `{"a":3,"😂":2,"` + "\uffff" + `":1}`},
	{"accepts member names that differ only in case", `{"a":1,"A":2}`, `{"A":2,"a":1}`},
}
