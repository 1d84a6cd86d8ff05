package canon

import (
	"crypto/sha256"
	"sync"
)

// treeEncoders keeps encoders, with their buffers, between digests of value
// trees: the canonical form is hashed and dropped, so its buffer can serve
// the next digest.
var treeEncoders = sync.Pool{New: func() any {
	return &encoder{buf: make([]byte, 0, 2048), names: make([]string, 0, 32)}
}}

// maxPooledBuf is the largest buffer put back in the pool, so that one large
// document does not keep its buffer alive.
const maxPooledBuf = 64 << 10

// DigestTree returns the digest of a value tree as produced by Parse, without
// parsing it again: "sha256:" + hex(SHA-256(Encode(v))).
func DigestTree(v any) (string, error) {
	return digestTree(v, false, "")
}

// DigestTreeWithout is DigestTree of the object m with its member omit left
// out (m itself is not changed): the digest of what a signature member
// covers, for example. A missing member is no error.
func DigestTreeWithout(m map[string]any, omit string) (string, error) {
	return digestTree(m, true, omit)
}

func digestTree(v any, omitting bool, omit string) (string, error) {
	e := treeEncoders.Get().(*encoder)
	e.buf, e.depth, e.path = e.buf[:0], 0, e.path[:0]
	e.omitting, e.omit = omitting, omit
	err := e.value(v)
	var d string
	if err == nil {
		sum := sha256.Sum256(e.buf)
		d = digestOfSum(sum[:])
	}
	e.omitting, e.omit = false, ""
	if cap(e.buf) <= maxPooledBuf {
		clear(e.names[:cap(e.names)])
		e.names = e.names[:0]
		treeEncoders.Put(e)
	}
	if err != nil {
		return "", err
	}
	return d, nil
}
