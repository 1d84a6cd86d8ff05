package gate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/benchcpu"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// BenchmarkGate runs the whole gate on one envelope, as the executor does
// for every delivery: unsigned (the keyless checks) and signed (with the
// signature and expiry checks), at the seed's size and padded to 4 KiB and
// 16 KiB with more evidence quotes. A signed envelope is checked the first
// time (signed=true: the iterations cycle through more distinct approvals
// than the keyring remembers, so every signature is verified) and resent
// (signed=resent: the same bytes again, as a retry or a redelivery brings
// them).
func BenchmarkGate(b *testing.B) {
	key := scenario.TestKey()
	kr, err := sign.NewKeyring(sign.ApproverFor(scenario.Reviewer, key.Public()))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, size := range []int{0, 4 << 10, 16 << 10} {
		for _, mode := range []string{"false", "true", "resent"} {
			signed := mode != "false"
			var s *scenario.Seed
			check := gate.CheckBindings
			if signed {
				s, err = scenario.BuildSigned(key, now.Add(-time.Minute), time.Hour)
				check = (&gate.Checker{Keys: kr}).Check
			} else {
				s, err = scenario.Build()
			}
			if err != nil {
				b.Fatal(err)
			}
			envs := [][]byte{padded(b, s, size, key, signed, now, "approval-0001")}
			name := fmt.Sprintf("signed=%s/bytes=%d", mode, len(envs[0]))
			b.Run(name, func(b *testing.B) {
				// Built here, so that only the benchmarks selected pay for it.
				for i := len(envs); mode == "true" && i < distinctApprovals; i++ {
					envs = append(envs, padded(b, s, size, key, signed, now, fmt.Sprintf("approval-%05d", i)))
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(envs[0])))
				i := 0
				cpu := benchcpu.Start()
				for b.Loop() {
					if _, err := check(envs[i]); err != nil {
						b.Fatal(err)
					}
					if i++; i == len(envs) {
						i = 0
					}
				}
				cpu.Report(b, "approval")
			})
		}
	}
}

// distinctApprovals is more than the keyring remembers verified signatures
// (two generations of 4096).
const distinctApprovals = 10000

// BenchmarkRequestDigest is the canonical digest of the seed request, which
// the gate recomputes for every delivery.
func BenchmarkRequestDigest(b *testing.B) {
	s, err := scenario.Build()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(s.Original.Request)))
	for b.Loop() {
		if _, err := canon.Digest(s.Original.Request); err != nil {
			b.Fatal(err)
		}
	}
}

// padded returns the seed's original envelope, with the candidate's evidence
// grown until the envelope is about size bytes (0 keeps it as it is), and
// the request and approval made again for the new candidate.
func padded(b *testing.B, s *scenario.Seed, size int, key *sign.Key, signed bool, now time.Time, approvalID string) []byte {
	b.Helper()
	env := s.Original.Envelope()
	if size <= len(env) && approvalID == "approval-0001" {
		return env
	}
	var c document.Candidate
	if err := jsonUnmarshal(s.Original.Candidate, &c); err != nil {
		b.Fatal(err)
	}
	quote := strings.Repeat("x", 1000)
	for n := len(env); size > len(env) && n < size; n += len(quote) + 40 {
		c.Evidence = append(c.Evidence, document.Evidence{Quote: quote, StartMS: 1, EndMS: 2})
	}
	cand := jsonMarshal(b, c)
	opts := approveOptions(key, signed, now)
	opts.ID = approvalID
	a, err := scenario.ApproveWith(cand, "task-request-0001", "intent-0001", scenario.Title, opts)
	if err != nil {
		b.Fatal(err)
	}
	return a.Envelope()
}
