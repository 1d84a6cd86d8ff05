package history

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// Kinds of lines in a history file.
const (
	kindSession = "session"
	kindCall    = "call"
	kindReturn  = "return"
)

// line is one JSON line of a history file. A session line starts the
// lines of one process; a call line is written before the call, a return
// line after it.
type line struct {
	Kind string `json:"kind"`
	// Session names the process that wrote the line (session lines);
	// ID names the call (call and return lines): the session and a
	// sequence number.
	Session string `json:"session,omitempty"`
	PID     int    `json:"pid,omitempty"`
	ID      string `json:"id,omitempty"`
	// At is the wall-clock time in Unix nanoseconds: when the session
	// started, the call was sent or its response arrived.
	At int64 `json:"at"`

	// Op is OpDelete for a call that deleted a task (as its owner would);
	// empty for a create call.
	Op            string `json:"op,omitempty"`
	CallRef       string `json:"call_ref,omitempty"`
	IntentID      string `json:"intent_id,omitempty"`
	RequestDigest string `json:"request_digest,omitempty"`

	Outcome string `json:"outcome,omitempty"`
	TaskID  string `json:"task_id,omitempty"`
	StoreID string `json:"store_id,omitempty"`
	// TaskDeleted is a replayed result's mark: the task was deleted.
	TaskDeleted bool `json:"task_deleted,omitempty"`
	// Error is the text of the error the call returned; Class says
	// "transient" or "permanent" as the contract classifies it.
	Error string `json:"error,omitempty"`
	Class string `json:"class,omitempty"`
}

// Recorder appends the calls made through the services it wraps to one
// file. It is safe for concurrent use.
type Recorder struct {
	// OnError, when set before the first call, is told of the first line
	// that could not be written (the call itself goes ahead unchanged).
	OnError func(error)

	path    string
	session string
	now     func() time.Time

	mu   sync.Mutex
	f    *os.File
	seq  uint64
	err  error
	done bool
}

// Open opens path for appending (creating it if needed) and starts a new
// session in it. A file that a killed process left with a torn last line
// is first ended with a newline, so that the torn line stays alone.
func Open(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: opening %s: %w", path, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("history: making a session id: %w", err)
	}
	r := &Recorder{path: path, session: hex.EncodeToString(b[:]), now: time.Now, f: f}
	if err := endTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	if err := r.write(line{Kind: kindSession, Session: r.session, PID: os.Getpid(), At: r.now().UnixNano()}); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// endTornLine writes a newline when f does not end with one.
func endTornLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	_, err = f.Write([]byte{'\n'})
	return err
}

// Path is the file the recorder appends to.
func (r *Recorder) Path() string { return r.path }

// Session is the id of this recorder's session, the prefix of its call ids.
func (r *Recorder) Session() string { return r.session }

// Err returns the first error writing a line, if any: the file is then
// missing calls, and a check of it proves nothing.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close closes the file. Calls still under way afterwards go ahead
// unrecorded, and Err says so.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	r.done = true
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("history: closing %s: %w", r.path, err)
	}
	return nil
}

// OpDelete is the Op of a delete call: a task deleted by its owner.
const OpDelete = "delete"

// Deleted is the outcome recorded for a delete call that succeeded.
const Deleted = "deleted"

// WrapDelete returns del, recording every call of it as a delete of the
// intent's task (Call.Op OpDelete): a success is answered with outcome
// Deleted, an error is recorded as a create's is.
func (r *Recorder) WrapDelete(del func(ctx context.Context, intentID string) error) func(ctx context.Context, intentID string) error {
	return func(ctx context.Context, intentID string) error {
		id := r.nextID()
		_ = r.write(line{Kind: kindCall, Op: OpDelete, ID: id, At: r.now().UnixNano(), IntentID: intentID})
		err := del(ctx, intentID)
		ret := line{Kind: kindReturn, ID: id, At: r.now().UnixNano(), Outcome: Deleted}
		if err != nil {
			ret.Outcome, ret.Error, ret.Class = "", err.Error(), "transient"
			if ret.Error == "" {
				ret.Error = "(an error without text)"
			}
			if taskservice.IsPermanent(err) {
				ret.Class = "permanent"
			}
		}
		_ = r.write(ret)
		return err
	}
}

// Wrap returns a service that records every create call and passes it to
// svc unchanged.
func (r *Recorder) Wrap(svc taskservice.Service) taskservice.Service {
	return recorded{r: r, svc: svc}
}

type recorded struct {
	r   *Recorder
	svc taskservice.Service
}

func (s recorded) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	id := s.r.nextID()
	_ = s.r.write(line{Kind: kindCall, ID: id, At: s.r.now().UnixNano(),
		CallRef: req.CallRef, IntentID: req.IntentID, RequestDigest: req.RequestDigest})
	res, err := s.svc.Create(ctx, req)
	ret := line{Kind: kindReturn, ID: id, At: s.r.now().UnixNano()}
	if err != nil {
		ret.Error = err.Error()
		if ret.Error == "" {
			ret.Error = "(an error without text)"
		}
		ret.Class = "transient"
		if taskservice.IsPermanent(err) {
			ret.Class = "permanent"
		}
	} else {
		ret.Outcome, ret.TaskID, ret.StoreID, ret.TaskDeleted = string(res.Outcome), res.TaskID, res.StoreID, res.TaskDeleted
	}
	_ = s.r.write(ret)
	return res, err
}

func (r *Recorder) nextID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return r.session + "-" + strconv.FormatUint(r.seq, 10)
}

// write appends l as one line, in one write.
func (r *Recorder) write(l line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return r.fail(fmt.Errorf("history: encoding a line: %w", err))
	}
	b = append(b, '\n')
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return r.fail(fmt.Errorf("history: %s: a %s line after Close", r.path, l.Kind))
	}
	_, err = r.f.Write(b)
	r.mu.Unlock()
	if err != nil {
		return r.fail(fmt.Errorf("history: writing to %s: %w", r.path, err))
	}
	return nil
}

func (r *Recorder) fail(err error) error {
	r.mu.Lock()
	first := r.err == nil
	if first {
		r.err = err
	}
	r.mu.Unlock()
	if first && r.OnError != nil {
		r.OnError(err)
	}
	return err
}

// Call is one create call as recorded: what was asked, when, and what came
// back, if anything did.
type Call struct {
	// ID is unique across the files of one history: the session of the
	// process and a sequence number.
	ID   string
	File string

	// Op is OpDelete for a delete of the intent's task, empty for a
	// create call.
	Op string

	CallRef       string
	IntentID      string
	RequestDigest string

	// Sent is when the call was made; Returned when it returned, zero when
	// it never did (the process died first).
	Sent     time.Time
	Returned time.Time

	// Answered reports that the service answered with a result: Outcome,
	// TaskID and StoreID hold it.
	Answered bool
	Outcome  string
	TaskID   string
	StoreID  string
	// TaskDeleted is a replayed result's mark that the task was deleted.
	TaskDeleted bool

	// Err is the text of the error the call returned, and ErrClass
	// "transient" or "permanent".
	Err      string
	ErrClass string
}

// Known reports whether the call's effect is known: the service answered.
// A call that failed or never returned may or may not have taken effect.
func (c Call) Known() bool { return c.Answered }

// History is what one or more files hold.
type History struct {
	// Calls, ordered by the time they were sent.
	Calls []Call
	// Sessions counts the processes that wrote the files.
	Sessions int
	// Torn counts lines cut short by a process killed while writing them;
	// each is the last line of its session.
	Torn int
}

// Read reads and merges the history files at paths.
func Read(paths ...string) (History, error) {
	var h History
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return History{}, fmt.Errorf("history: %w", err)
		}
		err = h.read(f, p)
		f.Close()
		if err != nil {
			return History{}, err
		}
	}
	sortCalls(h.Calls)
	return h, nil
}

// ReadFrom reads one history from rd, naming it name in errors and calls.
func ReadFrom(rd io.Reader, name string) (History, error) {
	var h History
	if err := h.read(rd, name); err != nil {
		return History{}, err
	}
	sortCalls(h.Calls)
	return h, nil
}

func (h *History) read(rd io.Reader, name string) error {
	data, err := io.ReadAll(rd)
	if err != nil {
		return fmt.Errorf("history: reading %s: %w", name, err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	index := map[string]int{} // call id → index in h.Calls
	session := ""
	for i, raw := range lines {
		if len(raw) == 0 {
			continue
		}
		var l line
		if err := strictUnmarshal(raw, &l); err != nil {
			// A line cut short by a kill is the last of its session: the
			// file ends, or the next process starts a session.
			if i == len(lines)-1 || startsSession(lines[i+1:]) {
				h.Torn++
				continue
			}
			return fmt.Errorf("history: %s line %d: %w", name, i+1, err)
		}
		switch l.Kind {
		case kindSession:
			if l.Session == "" {
				return fmt.Errorf("history: %s line %d: a session without an id", name, i+1)
			}
			session = l.Session
			h.Sessions++
		case kindCall:
			if session == "" {
				return fmt.Errorf("history: %s line %d: a call before any session", name, i+1)
			}
			if _, dup := index[l.ID]; dup || l.ID == "" {
				return fmt.Errorf("history: %s line %d: call id %q missing or repeated", name, i+1, l.ID)
			}
			index[l.ID] = len(h.Calls)
			if l.Op != "" && l.Op != OpDelete {
				return fmt.Errorf("history: %s line %d: unknown op %q", name, i+1, l.Op)
			}
			h.Calls = append(h.Calls, Call{ID: l.ID, File: name, Op: l.Op, CallRef: l.CallRef, IntentID: l.IntentID,
				RequestDigest: l.RequestDigest, Sent: time.Unix(0, l.At)})
		case kindReturn:
			k, ok := index[l.ID]
			if !ok {
				return fmt.Errorf("history: %s line %d: a response to call %q, which was never made", name, i+1, l.ID)
			}
			c := &h.Calls[k]
			if !c.Returned.IsZero() {
				return fmt.Errorf("history: %s line %d: a second response to call %q", name, i+1, l.ID)
			}
			c.Returned = time.Unix(0, l.At)
			if l.Error != "" {
				c.Err, c.ErrClass = l.Error, l.Class
			} else {
				c.Answered, c.Outcome, c.TaskID, c.StoreID, c.TaskDeleted = true, l.Outcome, l.TaskID, l.StoreID, l.TaskDeleted
			}
		default:
			return fmt.Errorf("history: %s line %d: unknown kind %q", name, i+1, l.Kind)
		}
	}
	return nil
}

func startsSession(rest [][]byte) bool {
	for _, raw := range rest {
		if len(raw) == 0 {
			continue
		}
		var l line
		return json.Unmarshal(raw, &l) == nil && l.Kind == kindSession
	}
	return true
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the line's object")
	}
	return nil
}

func sortCalls(calls []Call) {
	slices.SortStableFunc(calls, func(a, b Call) int {
		if c := a.Sent.Compare(b.Sent); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
