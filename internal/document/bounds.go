package document

// What every task service accepts. The gate's decoder refuses a request
// outside these bounds at the envelope check, naming the member, so that
// the refusal is a rejected receipt and no service is called with a key or
// a date that one of them would refuse for good.

// MaxEvidence bounds a candidate's evidence quotes: with every other list
// and string of the three documents bounded, it bounds the envelope.
const MaxEvidence = 16

// MaxEnvelopeBytes bounds an envelope (and every document) as written.
// The largest valid envelope, every member at its bound and written
// plainly (scenario.Largest), is some 76 KiB; the bound leaves room for a
// writer's white space and escapes, and is what the APPROVALS stream takes
// (topology.ApprovalMaxMsg, with room for headers), so that no message
// larger than a valid envelope fills the stream.
const MaxEnvelopeBytes = 84 << 10

// MaxKeyNameBytes bounds the name a key takes where a task service names
// one resource per key: the CalDAV adapter's resource name
// (taskservice/caldav ScopedResourceName, ".ics" and a tag included), the
// tightest bound of the services on an intent id.
const MaxKeyNameBytes = 240

// KeyTagBytes is what a mark key's tag adds to the CalDAV adapter's
// resource name: "~." and 32 hexadecimal digits. The bound counts it
// whether or not the executors have a mark key, so that every key passed
// fits with one.
const KeyTagBytes = 34

// EarliestDueDate is the earliest day a due date may name (as written, in
// its own offset): the CalDAV adapter writes a due time in an offset with a
// time zone whose one observance starts on that day, and earlier days are
// no task's due date.
const EarliestDueDate = "1970-01-01"

// KeyNameBytes is the length of the resource name of the key (scope,
// intentID) in the CalDAV adapter's encoding: the scope and "~~" unless it
// is the default one, the intent id with each byte other than A-Z, a-z,
// 0-9, '-', '_' and '.' (a '.' at the start included) written as three,
// the tag (KeyTagBytes) and ".ics".
func KeyNameBytes(scope, intentID string) int {
	n := KeyTagBytes + len(".ics")
	if scope != "" && scope != DefaultScope {
		n += len(scope) + len("~~")
	}
	for i := range len(intentID) {
		c := intentID[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			n++
		} else {
			n += 3
		}
	}
	return n
}

// keyFits refuses, at path (the intent id's), a key whose resource name
// would be longer than MaxKeyNameBytes.
func (r *reader) keyFits(path, scope, intentID string) {
	if r.err != nil {
		return
	}
	if n := KeyNameBytes(scope, intentID); n > MaxKeyNameBytes {
		r.fail(path, RuleValue, ErrValue, "makes a %d-byte task name with its scope (a CalDAV resource name: the scope, the intent id with each byte but A-Z, a-z, 0-9, '-', '_' and '.' written as three, a 34-byte tag and \".ics\"); at most %d fit every task service: shorten the intent id and approve the request again",
			n, MaxKeyNameBytes)
	}
}
