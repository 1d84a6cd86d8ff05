package sign

import (
	"crypto/ed25519"
	"sync"
)

// verifiedCap bounds each of the two generations of a verifiedSet: at most
// 2 × verifiedCap signatures are remembered (about 200 bytes each).
const verifiedCap = 4096

// verifiedKey is everything an approval's signature check depends on: the
// public key, the digest the signature covers (the approval without its
// signature, which names the key id) and the encoded signature, all compared
// whole. A check is skipped only for exactly this triple, which verified
// before; any other byte anywhere is a new check.
type verifiedKey struct {
	pub       [ed25519.PublicKeySize]byte
	digest    string
	signature string
}

// verifiedSet remembers signatures that verified, so that a resent approval
// (the same bytes delivered again: a publisher's retry, a redelivery) is not
// checked twice. Only successes are kept: a signature that fails is checked
// again on every delivery. It holds two generations: when the current one is
// full it becomes the previous one and the one before is dropped, so the set
// stays bounded and keeps the most recent signatures.
type verifiedSet struct {
	mu       sync.Mutex
	cur, old map[verifiedKey]struct{}
}

func newVerifiedSet() *verifiedSet {
	return &verifiedSet{cur: make(map[verifiedKey]struct{})}
}

func (s *verifiedSet) has(k *verifiedKey) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[*k]; ok {
		return true
	}
	if _, ok := s.old[*k]; ok {
		s.addLocked(k)
		return true
	}
	return false
}

func (s *verifiedSet) add(k *verifiedKey) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(k)
}

func (s *verifiedSet) addLocked(k *verifiedKey) {
	if len(s.cur) >= verifiedCap {
		s.old, s.cur = s.cur, make(map[verifiedKey]struct{}, verifiedCap)
	}
	s.cur[*k] = struct{}{}
}

// len is the number of signatures remembered, for tests.
func (s *verifiedSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cur) + len(s.old)
}
