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

// Whatever a batch holds, each signature gets the answer it gets checked
// alone: all valid, one bad among many, many bad, every kind of bad.
func TestABatchGivesEachSignatureItsOwnAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []signingKey{newSigningKey(t, 1), newSigningKey(t, 2), newSigningKey(t, 3)}
	cases := []struct {
		name string
		size int
		bad  float64 // share of signatures that are not valid
	}{
		{"two valid signatures", 2, 0},
		{"a full batch of valid signatures", maxVerifyBatch, 0},
		{"one bad signature among many", maxVerifyBatch, 1.0 / maxVerifyBatch},
		{"half of them bad", 17, 0.5},
		{"every one bad", 9, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			batch := make([]*verifyJob, tc.size)
			kinds := make([]string, tc.size)
			for i := range batch {
				kinds[i] = "valid"
				if rng.Float64() < tc.bad || (tc.bad > 0 && i == tc.size/2) {
					kinds[i] = jobKinds[1+rng.IntN(len(jobKinds)-1)]
				}
				k := keys[rng.IntN(len(keys))]
				batch[i] = makeJob(t, k, keys[(slicesIndex(keys, k)+1)%len(keys)], kinds[i], fmt.Sprintf("sha256:%s-%d", tc.name, i), rng)
			}
			verifyBatch(batch)
			for i, j := range batch {
				alone := checkSignature(j.pub, j.msg, j.sig)
				if j.ok != alone {
					t.Errorf("signature %d (%s): %v in the batch, %v alone", i, kinds[i], j.ok, alone)
				}
				if want := kinds[i] == "valid" || kinds[i] == "torsion in R"; alone != want {
					t.Errorf("signature %d (%s): accepted=%v alone, want %v", i, kinds[i], alone, want)
				}
			}
		})
	}
}

func slicesIndex(keys []signingKey, k signingKey) int {
	for i := range keys {
		if keys[i].expanded == k.expanded {
			return i
		}
	}
	return -1
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

// FuzzBatchAgreesWithOneByOne puts an arbitrary signature among valid ones;
// each must get the answer it gets alone.
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
		verifyBatch(batch)
		for i, j := range batch {
			if alone := checkSignature(j.pub, j.msg, j.sig); j.ok != alone {
				t.Fatalf("signature %d: %v in the batch, %v alone", i, j.ok, alone)
			}
		}
	})
}
