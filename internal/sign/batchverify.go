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
	// answered is set, with valid, when the job's batch passed or when it
	// was checked alone; otherwise the caller checks its signature alone.
	answered, valid bool
	done            chan struct{}
}

// batchVerifier checks the signatures that callers hand it at about the same
// time in one batch (curve25519-voi's batch verification: one multiscalar
// multiplication for all of them, about half the cost of checking each
// alone). It has no timer: a batch is whatever is waiting when a verifier
// goroutine is free, after it has let the goroutines that can run bring
// theirs (runtime.Gosched, which returns at once when nothing else can run),
// so one signature alone, as on an idle executor, is checked at once. There
// is one verifier goroutine per processor, so that checks use every core.
//
// A batch that fails (one of its signatures or more is bad) is not searched
// for the bad ones: each caller then checks its own signature alone, on its
// own goroutine, as it would without batches. A bad signature thus costs
// its batch's check on top of the checks it causes; it cannot slow the
// verifier goroutines for longer than one batch check.
type batchVerifier struct {
	start sync.Once
	jobs  chan *verifyJob
}

// verifier serves every keyring of the process.
var verifier batchVerifier

// verify reports whether sig is a valid signature of msg by pub under
// verifyOptions, the answer checkSignature gives.
func (v *batchVerifier) verify(pub *voi.ExpandedPublicKey, msg, sig []byte) bool {
	v.start.Do(func() {
		n := runtime.GOMAXPROCS(0)
		v.jobs = make(chan *verifyJob, n*maxVerifyBatch)
		for range n {
			go v.loop()
		}
	})
	j := &verifyJob{pub: pub, msg: msg, sig: sig, done: make(chan struct{})}
	v.jobs <- j
	<-j.done
	if j.answered {
		return j.valid
	}
	return checkSignature(pub, msg, sig)
}

// loop takes the waiting signatures in batches, for the life of the process.
func (v *batchVerifier) loop() {
	batch := make([]*verifyJob, 0, maxVerifyBatch)
	for first := range v.jobs {
		batch = v.gather(append(batch[:0], first))
		answerBatch(batch)
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

// answerBatch answers every job of a batch that passes, and the job of a
// batch of one, which is checked alone.
func answerBatch(batch []*verifyJob) {
	if len(batch) == 1 {
		j := batch[0]
		j.answered, j.valid = true, checkSignature(j.pub, j.msg, j.sig)
		return
	}
	if batchPasses(batch) {
		for _, j := range batch {
			j.answered, j.valid = true, true
		}
	}
}

// batchPasses reports whether every signature of the batch is valid. The
// batch equation is the cofactored one that checkSignature checks alone,
// with random coefficients: it holds only if every signature's does (but
// with probability 2^-128), and it holds when they all do.
func batchPasses(batch []*verifyJob) bool {
	bv := voi.NewBatchVerifier()
	for _, j := range batch {
		bv.AddExpandedWithOptions(j.pub, j.msg, j.sig, verifyOptions)
	}
	return bv.VerifyBatchOnly(nil)
}
