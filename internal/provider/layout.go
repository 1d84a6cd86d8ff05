package provider

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Key layout. Every record kind has its own one-byte prefix; sequences are
// 8-byte big-endian so that keys sort by sequence. A key is the pair
// (scope, intent id), written <scope> 0x00 <intent id>: a scope is one
// subject token ([a-z0-9_-]) and intent ids never contain control
// characters, so 0x00 ends either safely.
//
//	m                                   counters and sequences (metaRecord)
//	s <scope>                           ScopeCounts, one scope's counters
//	r <seq>                             RequestRecord, one per request received
//	c <seq>                             CreateRecord, one per create executed
//	t <seq>                             TaskRecord, one per task that exists
//	d <seq>                             DeleteRecord, one per task deleted
//	i <key>                             FirstResult, the first digest and result
//	o <request seq>                     <key>, orders the intent records
//	x <key> 0x00 <kind> <seq>           per-key index of r, c, t and d records
//	e <keep_until ns> <key>             expiry index: when a key may be compacted
//
// The intent record of a live key stands for three index entries that a
// create of a new key does not write (impliedEntry): its first request
// (RequestSeq), its create and its task while it exists (the task number,
// which is also the create's sequence: each create makes one task). Every
// other record of a key has its entry written: later requests, deletes,
// and the further creates and tasks of the unsafe mode. Compaction writes
// the implied entries of a key it removes, so that its records stay listed.
//
// Layout version 1 (before scopes) keyed i, o and x by the intent id alone;
// Open moves such a store into version 3, its keys into scope "default".
// Version 2 wrote every index entry; it is read as it is (an entry both
// written and implied is listed once) and becomes version 3 at its next
// commit, so that a service of version 2 refuses it after.
const (
	prefixMeta        = 'm'
	prefixScope       = 's'
	prefixRequest     = 'r'
	prefixCreate      = 'c'
	prefixTask        = 't'
	prefixDelete      = 'd'
	prefixIntent      = 'i'
	prefixIntentOrder = 'o'
	prefixIndex       = 'x'
	prefixExpiry      = 'e'
)

// metaFormat is the layout version written in the meta record.
const metaFormat = 3

// metaFormatIndexWritten is the layout that wrote every per-key index
// entry; it is read as version 3 is.
const metaFormatIndexWritten = 2

// metaFormatUnscoped is the layout before scopes; Open migrates it.
const metaFormatUnscoped = 1

// metaRecord is the value of the meta key: the store's identity, the
// counters and the last task number, updated in the same batch as the
// records they count.
type metaRecord struct {
	Format int `json:"format"`
	// StoreID is created with the store and never changes; a store made
	// before ids existed gets one when it is next opened.
	StoreID          string `json:"store_id,omitempty"`
	RequestsReceived int64  `json:"requests_received"`
	CreatesExecuted  int64  `json:"creates_executed"`
	TasksExisting    int64  `json:"tasks_existing"`
	LastTaskNumber   uint64 `json:"last_task_number"`
	// Format 2 on: the keys and the deletes.
	DeletesExecuted int64 `json:"deletes_executed"`
	KeysLive        int64 `json:"keys_live"`
	KeysCompacted   int64 `json:"keys_compacted"`
	RecordsRetired  int64 `json:"records_retired"`
}

func (m metaRecord) keys() KeyCounts {
	return KeyCounts{Live: m.KeysLive, Compacted: m.KeysCompacted, TasksDeleted: m.DeletesExecuted, RecordsRetired: m.RecordsRetired}
}

func (m metaRecord) counts() Counts {
	return Counts{
		RequestsReceived: m.RequestsReceived,
		CreatesExecuted:  m.CreatesExecuted,
		TasksExisting:    m.TasksExisting,
	}
}

// parseKeep reads a stored keep_until; "" is forever (zero time).
func parseKeep(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("keep_until %q: %w: %v", v, ErrCorrupt, err)
	}
	return t, nil
}

func formatKeep(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// FormatTaskID renders task number n as fake-task-0001, ..., fake-task-9999,
// fake-task-10000, ...
func FormatTaskID(n uint64) string {
	return fmt.Sprintf("fake-task-%04d", n)
}

func seqPrefix(kind byte) []byte { return []byte{kind} }

func seqKey(kind byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kind}, seq)
}

// keyName is a key (scope, intent id) as one string: <scope> 0x00 <intent>.
func keyName(scope, id string) string { return scope + "\x00" + id }

// splitKeyName is the inverse of keyName.
func splitKeyName(k string) (scope, id string, ok bool) {
	return strings.Cut(k, "\x00")
}

func intentKey(scope, id string) []byte {
	return append([]byte{prefixIntent}, keyName(scope, id)...)
}

func scopeKey(scope string) []byte {
	return append([]byte{prefixScope}, scope...)
}

func indexPrefix(scope, id string, kind byte) []byte {
	k := make([]byte, 0, len(scope)+len(id)+4)
	k = append(k, prefixIndex)
	k = append(k, keyName(scope, id)...)
	return append(k, 0, kind)
}

func indexKey(scope, id string, kind byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(scope, id, kind), seq)
}

// impliedEntry is the sequence of the record of kind (r, c or t) whose
// per-key index entry the key's intent record stands for; 0 = none.
func impliedEntry(fr FirstResult, kind byte) uint64 {
	task, _ := parseTaskID(fr.TaskID)
	switch kind {
	case prefixRequest:
		return fr.RequestSeq
	case prefixCreate:
		return task
	case prefixTask:
		if !fr.TaskDeleted {
			return task
		}
	}
	return 0
}

// expiryKey is the expiry index entry of a key kept until at.
func expiryKey(at time.Time, scope, id string) []byte {
	k := binary.BigEndian.AppendUint64([]byte{prefixExpiry}, uint64(max(at.UnixNano(), 0)))
	return append(k, keyName(scope, id)...)
}

func parseExpiryKey(k []byte) (scope, id string, at time.Time, err error) {
	if len(k) < 1+8+2 {
		return "", "", time.Time{}, fmt.Errorf("expiry entry %q: %w", k, ErrCorrupt)
	}
	at = time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))).UTC()
	scope, id, ok := splitKeyName(string(k[9:]))
	if !ok {
		return "", "", time.Time{}, fmt.Errorf("expiry entry %q: %w", k, ErrCorrupt)
	}
	return scope, id, at, nil
}

// parseTaskID reads the number of a task id made by FormatTaskID.
func parseTaskID(id string) (uint64, bool) {
	digits, ok := strings.CutPrefix(id, "fake-task-")
	if !ok || len(digits) < 4 || (len(digits) > 4 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 || FormatTaskID(n) != id {
		return 0, false
	}
	return n, true
}

// prefixEnd is the smallest key greater than every key with this prefix.
// Every prefix used here ends in a byte below 0xff.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	return end
}

// storeIDPrefix starts every store id.
const storeIDPrefix = "store-"

// newStoreID returns "store-" and 16 random hex digits.
func newStoreID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return storeIDPrefix + hex.EncodeToString(b[:]), nil
}
