package sign

import (
	"crypto/ed25519"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// signingKey is a generated key with what the tests need of it.
type signingKey struct {
	priv     ed25519.PrivateKey
	pub      []byte
	expanded *voi.ExpandedPublicKey
}

func newSigningKey(t testing.TB, seed byte) signingKey {
	t.Helper()
	s := make([]byte, 32)
	s[0] = seed
	priv := ed25519.NewKeyFromSeed(s)
	pub := []byte(priv.Public().(ed25519.PublicKey))
	x, err := expandKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{priv: priv, pub: pub, expanded: x}
}

// jobKinds are the signatures a batch is made of: a valid one and ways of
// being wrong.
var jobKinds = []string{"valid", "flipped bit", "other digest", "no context", "non-canonical S", "other key", "torsion in R"}

// makeJob makes a signature of the given kind for digest under k (other,
// for "other key").
func makeJob(t *testing.T, k, other signingKey, kind, digest string, rng *rand.Rand) *verifyJob {
	t.Helper()
	sig, err := k.priv.Sign(nil, []byte(digest), &ed25519.Options{Context: Context})
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte(digest)
	switch kind {
	case "flipped bit":
		sig[rng.IntN(len(sig))] ^= 1 << rng.IntN(8)
	case "other digest":
		msg = []byte(digest + "0")
	case "no context":
		sig = ed25519.Sign(k.priv, msg)
	case "non-canonical S":
		s := new(big.Int).SetBytes(reverse(sig[32:]))
		s.Add(s, order)
		copy(sig[32:], reverse(s.FillBytes(make([]byte, 32))))
	case "other key":
		return &verifyJob{pub: other.expanded, msg: msg, sig: sig}
	case "torsion in R":
		sig = signWith(t, k.pub, keyScalar(t, k.priv.Seed()), digest, orderTwoPoint(t))
	}
	return &verifyJob{pub: k.expanded, msg: msg, sig: sig}
}

// A batch passes exactly when every signature in it is valid: full batches
// of valid signatures (one with a small-order component in R among them,
// valid under the cofactored equation), and each kind of bad signature alone
// among valid ones, which fails the batch.
func TestABatchPassesExactlyWhenEverySignatureInItIsValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []signingKey{newSigningKey(t, 1), newSigningKey(t, 2), newSigningKey(t, 3)}
	batchOf := func(name string, size, at int, kind string) []*verifyJob {
		batch := make([]*verifyJob, size)
		for i := range batch {
			k := rng.IntN(len(keys))
			kindHere := "valid"
			if i == at {
				kindHere = kind
			}
			batch[i] = makeJob(t, keys[k], keys[(k+1)%len(keys)], kindHere, fmt.Sprintf("sha256:%s-%d", name, i), rng)
		}
		return batch
	}
	for _, size := range []int{2, 17, maxVerifyBatch} {
		for _, kind := range jobKinds {
			name := fmt.Sprintf("%s among %d", kind, size)
			t.Run(name, func(t *testing.T) {
				batch := batchOf(name, size, rng.IntN(size), kind)
				allValid := true
				for _, j := range batch {
					allValid = allValid && checkSignature(j.pub, j.msg, j.sig)
				}
				if want := kind == "valid" || kind == "torsion in R"; allValid != want {
					t.Fatalf("every signature valid alone: %v, want %v", allValid, want)
				}
				if got := batchPasses(batch); got != allValid {
					t.Fatalf("the batch passes: %v, every signature valid alone: %v", got, allValid)
				}
			})
		}
	}
}

// A job is answered by its batch only when the batch passes (or holds it
// alone); in a failed batch its caller checks it alone.
func TestOnlyAPassingBatchOrABatchOfOneAnswersItsJobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	k, other := newSigningKey(t, 6), newSigningKey(t, 7)
	good := func(i int) *verifyJob { return makeJob(t, k, other, "valid", fmt.Sprintf("sha256:good-%d", i), rng) }
	passing := []*verifyJob{good(0), good(1), good(2)}
	answerBatch(passing)
	failing := []*verifyJob{good(3), makeJob(t, k, other, "other digest", "sha256:bad", rng), good(4)}
	answerBatch(failing)
	alone := []*verifyJob{makeJob(t, k, other, "flipped bit", "sha256:alone", rng)}
	answerBatch(alone)
	for i, j := range passing {
		if !j.answered || !j.valid {
			t.Errorf("passing batch, job %d: answered=%v valid=%v, want both", i, j.answered, j.valid)
		}
	}
	for i, j := range failing {
		if j.answered {
			t.Errorf("failed batch, job %d answered (valid=%v); its caller must check it alone", i, j.valid)
		}
	}
	if !alone[0].answered || alone[0].valid {
		t.Errorf("a bad signature alone: answered=%v valid=%v, want answered and not valid", alone[0].answered, alone[0].valid)
	}
}

// Many callers at once, valid and bad signatures mixed, each get their own
// signature's answer from the shared verifier.
func TestConcurrentCallersGetTheirOwnAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	keys := []signingKey{newSigningKey(t, 4), newSigningKey(t, 5)}
	const callers = 300
	jobs := make([]*verifyJob, callers)
	want := make([]bool, callers)
	for i := range jobs {
		kind := "valid"
		if i%5 == 0 {
			kind = jobKinds[1+rng.IntN(len(jobKinds)-1)]
		}
		jobs[i] = makeJob(t, keys[i%2], keys[(i+1)%2], kind, fmt.Sprintf("sha256:caller-%d", i), rng)
		want[i] = checkSignature(jobs[i].pub, jobs[i].msg, jobs[i].sig)
	}
	got := make([]bool, callers)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { got[i] = verifier.verify(j.pub, j.msg, j.sig) })
	}
	wg.Wait()
	for i := range jobs {
		if got[i] != want[i] {
			t.Errorf("caller %d: verifier answered %v, the signature alone %v", i, got[i], want[i])
		}
	}
}

// FuzzBatchAgreesWithOneByOne puts an arbitrary signature among valid ones:
// the batch passes exactly when that signature is valid alone.
func FuzzBatchAgreesWithOneByOne(f *testing.F) {
	k := ed25519.NewKeyFromSeed(make([]byte, 32))
	sig, _ := k.Sign(nil, []byte("sha256:x"), &ed25519.Options{Context: Context})
	f.Add("sha256:x", sig, uint8(3))
	f.Add("", make([]byte, 64), uint8(0))
	f.Fuzz(func(t *testing.T, digest string, sig []byte, at uint8) {
		if len(sig) != ed25519.SignatureSize {
			return
		}
		key := newSigningKey(t, 0)
		batch := make([]*verifyJob, 8)
		for i := range batch {
			d := fmt.Sprintf("sha256:valid-%d", i)
			s, _ := key.priv.Sign(nil, []byte(d), &ed25519.Options{Context: Context})
			batch[i] = &verifyJob{pub: key.expanded, msg: []byte(d), sig: s}
		}
		batch[int(at)%len(batch)] = &verifyJob{pub: key.expanded, msg: []byte(digest), sig: sig}
		if got, alone := batchPasses(batch), checkSignature(key.expanded, []byte(digest), sig); got != alone {
			t.Fatalf("the batch passes: %v; the signature alone: %v", got, alone)
		}
	})
}
