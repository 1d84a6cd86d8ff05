package provider

import (
	"strconv"
	"unicode/utf8"
)

// The records every create call writes, and its reply, are encoded by
// hand, without reflection: each appendJSON writes the bytes encoding/json
// writes for the same value (tests compare the two over every field), so
// stored records and replies read back as before. Records written once in
// a while (meta, scope counters, deletes) go through encoding/json.

// jsonRecord is a record that encodes itself.
type jsonRecord interface {
	appendJSON(dst []byte) []byte
}

func (r RequestRecord) appendJSON(b []byte) []byte {
	b = strconv.AppendUint(append(b, `{"seq":`...), r.Seq, 10)
	b = appendJSONString(append(b, `,"scope":`...), r.Scope)
	b = appendJSONString(append(b, `,"intent_id":`...), r.IntentID)
	b = appendJSONString(append(b, `,"request_digest":`...), r.RequestDigest)
	b = appendOmitEmpty(b, `,"request_id":`, r.RequestID)
	b = appendJSONString(append(b, `,"outcome":`...), r.Outcome)
	b = appendJSONString(append(b, `,"task_id":`...), r.TaskID)
	b = appendJSONString(append(b, `,"received_at":`...), r.ReceivedAt)
	b = appendOmitEmpty(b, `,"call_ref":`, r.CallRef)
	b = appendOmitEmpty(b, `,"not_after":`, r.NotAfter)
	if r.TaskDeleted {
		b = append(b, `,"task_deleted":true`...)
	}
	if r.ReplyDropped {
		b = append(b, `,"reply_dropped":true`...)
	}
	if f := r.Refusal; f != nil {
		b = appendJSONString(append(b, `,"refusal":{"check":`...), f.Check)
		b = appendJSONString(append(b, `,"field":`...), f.Field)
		b = append(appendJSONString(append(b, `,"reason":`...), f.Reason), '}')
	}
	return append(b, '}')
}

func (r CreateRecord) appendJSON(b []byte) []byte {
	b = strconv.AppendUint(append(b, `{"seq":`...), r.Seq, 10)
	b = appendJSONString(append(b, `,"scope":`...), r.Scope)
	b = appendJSONString(append(b, `,"intent_id":`...), r.IntentID)
	b = appendJSONString(append(b, `,"request_digest":`...), r.RequestDigest)
	b = appendJSONString(append(b, `,"task_id":`...), r.TaskID)
	b = strconv.AppendUint(append(b, `,"request_seq":`...), r.RequestSeq, 10)
	b = appendJSONString(append(b, `,"created_at":`...), r.CreatedAt)
	return append(b, '}')
}

func (r TaskRecord) appendJSON(b []byte) []byte {
	b = strconv.AppendUint(append(b, `{"seq":`...), r.Seq, 10)
	b = appendJSONString(append(b, `,"task_id":`...), r.TaskID)
	b = appendJSONString(append(b, `,"scope":`...), r.Scope)
	b = appendJSONString(append(b, `,"intent_id":`...), r.IntentID)
	b = appendJSONString(append(b, `,"task":{"title":`...), r.Task.Title)
	b = appendNullable(append(b, `,"assignee_person_ref":`...), r.Task.AssigneePersonRef)
	b = appendNullable(append(b, `,"due_at":`...), r.Task.DueAt)
	b = appendJSONString(append(b, `},"created_at":`...), r.CreatedAt)
	return append(b, '}')
}

func (r FirstResult) appendJSON(b []byte) []byte {
	b = appendJSONString(append(b, `{"scope":`...), r.Scope)
	b = appendJSONString(append(b, `,"intent_id":`...), r.IntentID)
	b = appendJSONString(append(b, `,"request_digest":`...), r.RequestDigest)
	b = appendOmitEmpty(b, `,"request_id":`, r.RequestID)
	b = appendJSONString(append(b, `,"task_id":`...), r.TaskID)
	b = appendJSONString(append(b, `,"created_at":`...), r.CreatedAt)
	b = strconv.AppendUint(append(b, `,"request_seq":`...), r.RequestSeq, 10)
	b = appendOmitEmpty(b, `,"keep_until":`, r.KeepUntil)
	if r.TaskDeleted {
		b = append(b, `,"task_deleted":true`...)
	}
	b = appendOmitEmpty(b, `,"deleted_at":`, r.DeletedAt)
	return append(b, '}')
}

func (r CreateResponse) appendJSON(b []byte) []byte {
	b = appendJSONString(append(b, `{"outcome":`...), r.Outcome)
	b = appendJSONString(append(b, `,"task_id":`...), r.TaskID)
	b = r.First.appendJSON(append(b, `,"first":`...))
	b = strconv.AppendInt(append(b, `,"counts":{"requests_received":`...), r.Counts.RequestsReceived, 10)
	b = strconv.AppendInt(append(b, `,"creates_executed":`...), r.Counts.CreatesExecuted, 10)
	b = strconv.AppendInt(append(b, `,"tasks_existing":`...), r.Counts.TasksExisting, 10)
	b = strconv.AppendUint(append(b, `},"request_seq":`...), r.RequestSeq, 10)
	b = appendJSONString(append(b, `,"store_id":`...), r.StoreID)
	if r.TaskDeleted {
		b = append(b, `,"task_deleted":true`...)
	}
	return append(b, '}')
}

// appendOmitEmpty appends the member name and s, unless s is empty.
func appendOmitEmpty(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, name...), s)
}

// appendNullable appends *s, or null.
func appendNullable(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

const jsonHex = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes it: '"' and
// '\\' and the control characters escaped (\b \f \n \r \t by letter), '<',
// '>' and '&' as \u003c \u003e \u0026, U+2028 and U+2029 escaped, and
// each byte of invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}
