package provider

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Records returns one page of one kind of record, by sequence, for one
// scope, or for one key.
func (s *Store) Records(req RecordsRequest) (RecordsResponse, error) {
	limit, err := validateRecords(&req)
	if err != nil {
		return RecordsResponse{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return RecordsResponse{}, ErrClosed
	}
	resp := RecordsResponse{Kind: req.Kind}
	if req.Kind == RecordIntents {
		err = s.intentRecords(req, limit, &resp)
	} else {
		err = s.seqRecords(req, limit, &resp)
	}
	if err != nil {
		return RecordsResponse{}, fmt.Errorf("read %s records: %w", req.Kind, err)
	}
	return resp, nil
}

func (s *Store) seqRecords(req RecordsRequest, limit int, resp *RecordsResponse) error {
	var kind byte
	switch req.Kind {
	case RecordRequests:
		kind = prefixRequest
	case RecordCreates:
		kind = prefixCreate
	case RecordTasks:
		kind = prefixTask
	case RecordDeletes:
		kind = prefixDelete
	}
	// add decodes one record and keeps it when it is in the scope asked
	// for (records written before scopes are in "default").
	add := func(seq uint64, val []byte) (bool, error) {
		var err error
		scopeOf := func(sc *string) bool {
			if *sc == "" {
				*sc = DefaultScope
			}
			return req.Scope == "" || *sc == req.Scope
		}
		kept := false
		switch kind {
		case prefixRequest:
			kept, err = keepRecord(val, func(r *RequestRecord) *string { return &r.Scope }, scopeOf, &resp.Requests)
		case prefixCreate:
			kept, err = keepRecord(val, func(r *CreateRecord) *string { return &r.Scope }, scopeOf, &resp.Creates)
		case prefixTask:
			kept, err = keepRecord(val, func(r *TaskRecord) *string { return &r.Scope }, scopeOf, &resp.Tasks)
		case prefixDelete:
			kept, err = keepRecord(val, func(r *DeleteRecord) *string { return &r.Scope }, scopeOf, &resp.Deletes)
		}
		if err != nil {
			return false, fmt.Errorf("record %c %d: %w: %v", kind, seq, ErrCorrupt, err)
		}
		return kept, nil
	}
	if req.IntentID == "" {
		next, err := s.page(seqPrefix(kind), req.AfterSeq, limit, 0, add)
		resp.NextSeq = next
		return err
	}
	return s.keyRecords(req, kind, limit, resp, add)
}

// keyRecords pages through one key's records of kind: the entries of its
// index, and the one its intent record stands for (impliedEntry), each
// read by its sequence and handed to add.
func (s *Store) keyRecords(req RecordsRequest, kind byte, limit int, resp *RecordsResponse, add func(uint64, []byte) (bool, error)) error {
	var fr FirstResult
	if _, err := getJSON(s.db, intentKey(req.Scope, req.IntentID), &fr); err != nil {
		return err
	}
	implied := impliedEntry(fr, kind)
	next, err := s.page(indexPrefix(req.Scope, req.IntentID, kind), req.AfterSeq, limit, implied, func(seq uint64, _ []byte) (bool, error) {
		val, ok, err := getRaw(s.db, seqKey(kind, seq))
		if err != nil {
			return false, err
		}
		if !ok && seq == implied && kind != prefixTask {
			return false, nil // retired
		}
		if !ok {
			return false, fmt.Errorf("index names record %c %d that does not exist: %w", kind, seq, ErrCorrupt)
		}
		return add(seq, val)
	})
	resp.NextSeq = next
	return err
}

// keepRecord decodes val as a record of type R and appends it to list when
// scopeOf keeps the scope that scope finds in it.
func keepRecord[R any](val []byte, scope func(*R) *string, scopeOf func(*string) bool, list *[]R) (bool, error) {
	var r R
	if err := json.Unmarshal(val, &r); err != nil {
		return false, err
	}
	if !scopeOf(scope(&r)) {
		return false, nil
	}
	*list = append(*list, r)
	return true, nil
}

func (s *Store) intentRecords(req RecordsRequest, limit int, resp *RecordsResponse) error {
	if req.IntentID != "" {
		var fr FirstResult
		found, err := getJSON(s.db, intentKey(req.Scope, req.IntentID), &fr)
		if err != nil {
			return err
		}
		if found && fr.RequestSeq > req.AfterSeq {
			resp.Intents = append(resp.Intents, fr)
		}
		return nil
	}
	// Intent records in the order they were first seen, paged by the
	// sequence of the request that created them.
	next, err := s.page(seqPrefix(prefixIntentOrder), req.AfterSeq, limit, 0, func(seq uint64, val []byte) (bool, error) {
		scope, id, ok := splitKeyName(string(val))
		if !ok {
			return false, fmt.Errorf("intent order %d names %q, not a key: %w", seq, val, ErrCorrupt)
		}
		if req.Scope != "" && scope != req.Scope {
			return false, nil
		}
		var fr FirstResult
		found, err := getJSON(s.db, intentKey(scope, id), &fr)
		if err != nil {
			return false, err
		}
		if !found {
			return false, fmt.Errorf("intent %q in scope %q listed at %d does not exist: %w", id, scope, seq, ErrCorrupt)
		}
		resp.Intents = append(resp.Intents, fr)
		return true, nil
	})
	resp.NextSeq = next
	return err
}

// page calls fn for keys prefix+<seq> with seq > after, in order, until fn
// has kept limit records (fn says whether it kept one); extra, when not 0,
// is one more sequence called in its place among them (once, should a key
// also hold it), with no value. It returns the sequence to continue after,
// or 0 when the page is the last.
func (s *Store) page(prefix []byte, after uint64, limit int, extra uint64, fn func(seq uint64, val []byte) (bool, error)) (uint64, error) {
	if after == ^uint64(0) {
		return 0, nil
	}
	if extra <= after {
		extra = 0
	}
	lower := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), after+1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	next, err := pageIter(it, len(prefix), limit, extra, fn)
	if cerr := it.Close(); err == nil && cerr != nil {
		return 0, cerr
	}
	return next, err
}

// pageIter is the loop of page over the iterator it, whose keys are a
// prefix of prefixLen bytes and a sequence.
func pageIter(it *pebble.Iterator, prefixLen, limit int, extra uint64, fn func(seq uint64, val []byte) (bool, error)) (uint64, error) {
	n := 0
	var last uint64
	// visit hands fn one sequence; full says the page is full and seq
	// begins the next.
	visit := func(seq uint64, val []byte) (full bool, err error) {
		if n == limit {
			return true, nil
		}
		kept, err := fn(seq, val)
		if err != nil {
			return false, err
		}
		last = seq
		if kept {
			n++
		}
		return false, nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != prefixLen+8 {
			return 0, fmt.Errorf("key %q: %w", key, ErrCorrupt)
		}
		seq := binary.BigEndian.Uint64(key[prefixLen:])
		if extra != 0 && extra < seq {
			if full, err := visit(extra, nil); full || err != nil {
				return last, err
			}
		}
		if extra <= seq {
			extra = 0
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return 0, err
		}
		if full, err := visit(seq, val); full || err != nil {
			return last, err
		}
	}
	if extra != 0 {
		if full, err := visit(extra, nil); full || err != nil {
			return last, err
		}
	}
	return 0, nil
}
