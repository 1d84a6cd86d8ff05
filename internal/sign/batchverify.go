package sign

import (
	"runtime"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// maxVerifyBatch bounds the signatures checked together: past a few dozen a
// larger batch saves little (13 µs a signature at 64 against 11 at 256, one
// core of the bench machine) and keeps its callers waiting longer.
const maxVerifyBatch = 64

// verifyJob is one signature waiting for its answer.
type verifyJob struct {
	pub      *voi.ExpandedPublicKey
	msg, sig []byte
	ok       bool
	done     chan struct{}
}

// batchVerifier checks the signatures that callers hand it at about the same
// time in one batch (curve25519-voi's batch verification: one multiscalar
// multiplication for all of them, about half the cost of checking each
// alone), and gives each caller its own signature's answer. It has no timer:
// a batch is whatever is waiting when the verifier is free, after it has let
// the goroutines that can run bring theirs (runtime.Gosched, which returns at
// once when nothing else can run), so one signature alone, as on an idle
// executor, is checked at once.
type batchVerifier struct {
	start sync.Once
	jobs  chan *verifyJob
}

// verifier serves every keyring of the process.
var verifier batchVerifier

// verify reports whether sig is a valid signature of msg by pub under
// verifyOptions, the same answer checkSignature gives.
func (v *batchVerifier) verify(pub *voi.ExpandedPublicKey, msg, sig []byte) bool {
	v.start.Do(func() {
		v.jobs = make(chan *verifyJob, 4*maxVerifyBatch)
		go v.loop()
	})
	j := &verifyJob{pub: pub, msg: msg, sig: sig, done: make(chan struct{})}
	v.jobs <- j
	<-j.done
	return j.ok
}

// loop takes the waiting signatures in batches, for the life of the process.
func (v *batchVerifier) loop() {
	batch := make([]*verifyJob, 0, maxVerifyBatch)
	for first := range v.jobs {
		batch = v.gather(append(batch[:0], first))
		verifyBatch(batch)
		for _, j := range batch {
			close(j.done)
		}
		clear(batch)
	}
}

// gather adds the signatures waiting now to batch, yields so that runnable
// goroutines can bring theirs, and stops when the batch is full or a yield
// brought nothing.
func (v *batchVerifier) gather(batch []*verifyJob) []*verifyJob {
	for yields := 0; ; yields++ {
		before := len(batch)
	take:
		for len(batch) < maxVerifyBatch {
			select {
			case j := <-v.jobs:
				batch = append(batch, j)
			default:
				break take
			}
		}
		if len(batch) == maxVerifyBatch || (yields > 0 && len(batch) == before) || yields == 4 {
			return batch
		}
		runtime.Gosched()
	}
}

// verifyBatch sets each job's answer. A batch that fails as a whole (one
// signature or more is bad) is checked one signature at a time, so that
// each answer is its signature's own: the batch equation is the cofactored
// one that checkSignature checks alone, with random coefficients, so a batch
// passes only if every signature in it would (but with probability 2^-128).
func verifyBatch(batch []*verifyJob) {
	if len(batch) == 1 {
		batch[0].ok = checkSignature(batch[0].pub, batch[0].msg, batch[0].sig)
		return
	}
	bv := voi.NewBatchVerifier()
	for _, j := range batch {
		bv.AddExpandedWithOptions(j.pub, j.msg, j.sig, verifyOptions)
	}
	_, valid := bv.Verify(nil)
	for i, j := range batch {
		j.ok = valid[i]
	}
}
