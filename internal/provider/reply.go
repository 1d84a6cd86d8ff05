package provider

import "encoding/json"

// decodeCreateResponse decodes a create reply. The service writes its
// replies with encoding/json in one fixed layout; a reply in exactly that
// layout, with plain ASCII strings and non-negative whole numbers, is read
// by a scanner that knows it, and anything else by encoding/json. The
// scanner accepts only input that encoding/json decodes to the same value
// (FuzzCreateReply), so the result does not depend on which one read it.
func decodeCreateResponse(data []byte, out *CreateResponse) error {
	if scanCreateResponse(data, out) {
		return nil
	}
	*out = CreateResponse{}
	return json.Unmarshal(data, out)
}

// replyScanner reads the fixed layout of a create reply.
type replyScanner struct {
	data []byte
	pos  int
	ok   bool
}

// lit consumes s exactly.
func (r *replyScanner) lit(s string) {
	if !r.ok || len(r.data)-r.pos < len(s) || string(r.data[r.pos:r.pos+len(s)]) != s {
		r.ok = false
		return
	}
	r.pos += len(s)
}

// opt consumes s if it is next.
func (r *replyScanner) opt(s string) bool {
	if r.ok && len(r.data)-r.pos >= len(s) && string(r.data[r.pos:r.pos+len(s)]) == s {
		r.pos += len(s)
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes: such a string
// means the same to encoding/json as its bytes.
func (r *replyScanner) str() string {
	if !r.ok || r.pos >= len(r.data) || r.data[r.pos] != '"' {
		r.ok = false
		return ""
	}
	start := r.pos + 1
	for i := start; i < len(r.data); i++ {
		switch c := r.data[i]; {
		case c == '"':
			r.pos = i + 1
			return string(r.data[start:i])
		case c < 0x20 || c > 0x7e || c == '\\':
			r.ok = false
			return ""
		}
	}
	r.ok = false
	return ""
}

// num reads a whole number of 1 to 18 digits without a leading zero, which
// fits both int64 and uint64 exactly.
func (r *replyScanner) num() uint64 {
	if !r.ok {
		return 0
	}
	var n uint64
	i := r.pos
	for i < len(r.data) && i-r.pos < 19 && r.data[i] >= '0' && r.data[i] <= '9' {
		n = n*10 + uint64(r.data[i]-'0')
		i++
	}
	digits := i - r.pos
	if digits == 0 || digits > 18 || (digits > 1 && r.data[r.pos] == '0') {
		r.ok = false
		return 0
	}
	r.pos = i
	return n
}

// scanCreateResponse reads data into out if it is in the layout
// encoding/json gives a CreateResponse, and reports whether it was.
func scanCreateResponse(data []byte, out *CreateResponse) bool {
	r := replyScanner{data: data, ok: true}
	var v CreateResponse
	r.lit(`{"outcome":`)
	v.Outcome = r.str()
	r.lit(`,"task_id":`)
	v.TaskID = r.str()
	r.lit(`,"first":{"scope":`)
	v.First.Scope = r.str()
	r.lit(`,"intent_id":`)
	v.First.IntentID = r.str()
	r.lit(`,"request_digest":`)
	v.First.RequestDigest = r.str()
	if r.opt(`,"request_id":`) {
		v.First.RequestID = r.str()
	}
	r.lit(`,"task_id":`)
	v.First.TaskID = r.str()
	r.lit(`,"created_at":`)
	v.First.CreatedAt = r.str()
	r.lit(`,"request_seq":`)
	v.First.RequestSeq = r.num()
	if r.opt(`,"keep_until":`) {
		v.First.KeepUntil = r.str()
	}
	if r.opt(`,"task_deleted":true`) {
		v.First.TaskDeleted = true
	}
	if r.opt(`,"deleted_at":`) {
		v.First.DeletedAt = r.str()
	}
	r.lit(`},"counts":{"requests_received":`)
	v.Counts.RequestsReceived = int64(r.num())
	r.lit(`,"creates_executed":`)
	v.Counts.CreatesExecuted = int64(r.num())
	r.lit(`,"tasks_existing":`)
	v.Counts.TasksExisting = int64(r.num())
	r.lit(`},"request_seq":`)
	v.RequestSeq = r.num()
	r.lit(`,"store_id":`)
	v.StoreID = r.str()
	if r.opt(`,"task_deleted":true`) {
		v.TaskDeleted = true
	}
	r.lit(`}`)
	if !r.ok || r.pos != len(data) {
		return false
	}
	*out = v
	return true
}
