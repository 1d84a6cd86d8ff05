package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/subjects"
)

// Workload is a set of approvals to send, in sending order.
type Workload struct {
	Envelopes [][]byte
	Subjects  []string
	// Distinct is the number of distinct intent ids: the creates the
	// service must execute for this workload, no more, no fewer.
	Distinct  int
	Resends   int // copies of an approval already in the workload
	Conflicts int // a changed request under an intent id already in it, with its own approval
	// EnvelopeBytes is the size of a typical envelope.
	EnvelopeBytes int
}

// workloadSpec says what to generate.
type workloadSpec struct {
	N               int
	Resend          float64
	Conflict        float64
	Payload         int // target envelope bytes; 0 keeps the natural size
	Prefix          string
	Key             *sign.Key // nil: unsigned approvals
	Now             time.Time
	ApprovalTimeout time.Duration
	Seed            uint64
}

// candidate returns the seed candidate, grown with evidence quotes until an
// envelope built from it is about payload bytes.
func candidate(payload int) ([]byte, error) {
	c := scenario.Candidate()
	if payload <= 0 {
		return c, nil
	}
	var doc document.Candidate
	if err := json.Unmarshal(c, &doc); err != nil {
		return nil, err
	}
	// An unpadded signed envelope is about 1.5 KB.
	missing := payload - 1500
	for i := 0; missing > 0; i++ {
		n := min(missing, 4000)
		q := strings.Repeat("x", max(n-40, 1))
		doc.Evidence = append(doc.Evidence, document.Evidence{Quote: q, StartMS: int64(i) * 1000, EndMS: int64(i)*1000 + 500})
		missing -= n
	}
	return json.Marshal(doc)
}

// generator makes approved requests for one candidate.
type generator struct {
	spec       workloadSpec
	cand       []byte
	candDigest string
	candDoc    document.Candidate
}

func newGenerator(spec workloadSpec) (*generator, error) {
	cand, err := candidate(spec.Payload)
	if err != nil {
		return nil, err
	}
	g := &generator{spec: spec, cand: cand}
	if g.candDigest, err = canon.Digest(cand); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(cand, &g.candDoc); err != nil {
		return nil, err
	}
	return g, nil
}

// envelope builds the approved request of intent i; variant 0 is the
// original, others are changed requests under the same intent id.
func (g *generator) envelope(i, variant int) ([]byte, string, error) {
	intent := fmt.Sprintf("intent-%s-%07d", g.spec.Prefix, i)
	reqID := fmt.Sprintf("task-request-%s-%07d", g.spec.Prefix, i)
	apprID := fmt.Sprintf("approval-%s-%07d", g.spec.Prefix, i)
	title := fmt.Sprintf("%s (#%d)", scenario.Title, i)
	if variant > 0 {
		reqID += fmt.Sprintf("-changed-%d", variant)
		apprID += fmt.Sprintf("-changed-%d", variant)
		title += fmt.Sprintf(" changed %d", variant)
	}
	req, err := json.Marshal(document.Request{
		SchemaVersion: document.RequestVersion,
		RequestID:     reqID,
		IntentID:      intent,
		Operation:     document.OperationCreateTask,
		Provider:      document.ProviderFake,
		CandidateRef:  document.CandidateRef{CandidateID: g.candDoc.CandidateID, CandidateDigest: g.candDigest, SourceVersion: g.candDoc.Source.Version},
		Task:          document.Task{Title: title},
	})
	if err != nil {
		return nil, "", err
	}
	reqDigest, err := canon.Digest(req)
	if err != nil {
		return nil, "", err
	}
	at := g.spec.Now.UTC().Truncate(time.Second)
	a := &document.Approval{
		SchemaVersion: document.ApprovalVersion,
		ApprovalID:    apprID,
		ApprovedBy:    scenario.Reviewer,
		ApprovedAt:    at.Format(time.RFC3339),
		Candidate:     document.ApprovedCandidate{CandidateID: g.candDoc.CandidateID, Digest: g.candDigest, SourceVersion: g.candDoc.Source.Version},
		Request:       document.ApprovedRequest{RequestID: reqID, Digest: reqDigest},
		Capabilities:  []string{document.CapabilityCreateFakeTask},
	}
	if g.spec.Key != nil {
		if err := approve.Sign(a, g.spec.Key, at.Add(g.spec.ApprovalTimeout)); err != nil {
			return nil, "", err
		}
	}
	appr, err := json.Marshal(a)
	if err != nil {
		return nil, "", err
	}
	env, err := document.BuildEnvelope(g.cand, req, appr)
	if err != nil {
		return nil, "", err
	}
	return env, intent, nil
}

// generate makes the workload: distinct approvals, resends of some of them
// (the same bytes again) and changed requests under some of their intent
// ids, shuffled. It uses every CPU.
func generate(spec workloadSpec) (*Workload, error) {
	if spec.Resend < 0 || spec.Conflict < 0 || spec.Resend+spec.Conflict >= 1 {
		return nil, fmt.Errorf("bench: resend ratio %.2f and conflict ratio %.2f must be ≥ 0 and add up to less than 1", spec.Resend, spec.Conflict)
	}
	g, err := newGenerator(spec)
	if err != nil {
		return nil, err
	}
	resends := int(float64(spec.N)*spec.Resend + 0.5)
	conflicts := int(float64(spec.N)*spec.Conflict + 0.5)
	distinct := spec.N - resends - conflicts
	if distinct < 1 {
		return nil, fmt.Errorf("bench: %d approvals leave no distinct intent", spec.N)
	}
	r := rand.New(rand.NewPCG(spec.Seed, 7))
	type job struct{ intent, variant int }
	jobs := make([]job, 0, distinct+conflicts)
	for i := range distinct {
		jobs = append(jobs, job{i + 1, 0})
	}
	for c := range conflicts {
		jobs = append(jobs, job{r.IntN(distinct) + 1, c + 1})
	}
	envs := make([][]byte, len(jobs))
	intents := make([]string, len(jobs))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for j := w; j < len(jobs); j += workers {
				env, intent, err := g.envelope(jobs[j].intent, jobs[j].variant)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				envs[j], intents[j] = env, intent
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for range resends {
		k := r.IntN(distinct)
		envs = append(envs, envs[k])
		intents = append(intents, intents[k])
	}
	order := r.Perm(len(envs))
	w := &Workload{Distinct: distinct, Resends: resends, Conflicts: conflicts, EnvelopeBytes: len(envs[0])}
	w.Envelopes = make([][]byte, len(envs))
	w.Subjects = make([]string, len(envs))
	for i, k := range order {
		w.Envelopes[i] = envs[k]
		w.Subjects[i] = subjects.Approval("", intents[k])
	}
	return w, nil
}
