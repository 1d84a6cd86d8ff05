package scenario

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// Fixed facts of the seed scenario.
const (
	Title        = "補上通知設定的檢查項目"
	ChangedTitle = "補上通知設定的檢查項目，並補測試"
	Reviewer     = "reviewer-1"
)

// ApprovedAt is the fixed approval time of the seed scenario.
var ApprovedAt = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

// Approved is one approved request: three documents, as indented JSON.
type Approved struct {
	Candidate, Request, Approval []byte
}

// Envelope lays the three documents into one message.
func (a Approved) Envelope() []byte {
	b, err := document.BuildEnvelope(a.Candidate, a.Request, a.Approval)
	if err != nil {
		panic(err) // the documents are our own, marshalled above
	}
	return b
}

// Candidate returns the seed candidate: an anonymous speaker's commitment.
func Candidate() []byte {
	return mustJSON(document.Candidate{
		SchemaVersion: document.CandidateVersion,
		CandidateID:   "cand-0001",
		Source:        document.Source{TranscriptID: "transcript-weekly-sync-2026-11-27", Version: "v3"},
		Kind:          "commitment",
		Summary:       "有人在會議中說會把通知設定缺少的檢查項目補上",
		SpeakerRef:    nil,
		Evidence:      []document.Evidence{{Quote: "通知設定那邊少了幾個檢查項目，我會補上", StartMS: 812000, EndMS: 816500}},
	})
}

// Request returns a task request for the candidate, with the given ids and
// title, for the fake task service's default destination.
func Request(candidate []byte, requestID, intentID, title string) ([]byte, error) {
	return For{}.Request(candidate, requestID, intentID, title)
}

// Request returns a task request for the candidate, with the given ids and
// title, for f's provider and destination.
func (f For) Request(candidate []byte, requestID, intentID, title string) ([]byte, error) {
	var c document.Candidate
	if err := json.Unmarshal(candidate, &c); err != nil {
		return nil, fmt.Errorf("scenario: reading the candidate: %w", err)
	}
	d, err := canon.Digest(candidate)
	if err != nil {
		return nil, fmt.Errorf("scenario: digesting the candidate: %w", err)
	}
	return mustJSON(document.Request{
		SchemaVersion: document.RequestVersion,
		RequestID:     requestID,
		IntentID:      intentID,
		Operation:     document.OperationCreateTask,
		Provider:      f.provider(),
		Destination:   f.Destination,
		Scope:         f.Scope,
		CandidateRef:  document.CandidateRef{CandidateID: c.CandidateID, CandidateDigest: d, SourceVersion: c.Source.Version},
		Task:          document.Task{Title: title},
	}), nil
}

// Approve builds a request for the candidate and approves it (unsigned).
func Approve(candidate []byte, requestID, intentID, title, approvalID string) (Approved, error) {
	return ApproveWith(candidate, requestID, intentID, title, approve.Options{By: Reviewer, At: ApprovedAt, ID: approvalID})
}

// ApproveWith is Approve with the caller's approval options (a signing key,
// times). By and ID default to the scenario's.
func ApproveWith(candidate []byte, requestID, intentID, title string, opts approve.Options) (Approved, error) {
	return For{}.ApproveWith(candidate, requestID, intentID, title, opts)
}

// ApproveWith is the package's ApproveWith for f's provider and
// destination: the approval grants the provider's capability.
func (f For) ApproveWith(candidate []byte, requestID, intentID, title string, opts approve.Options) (Approved, error) {
	req, err := f.Request(candidate, requestID, intentID, title)
	if err != nil {
		return Approved{}, err
	}
	if opts.By == "" {
		opts.By = Reviewer
	}
	if opts.At.IsZero() {
		opts.At = ApprovedAt
	}
	a, err := approve.Approve(candidate, req, opts)
	if err != nil {
		return Approved{}, fmt.Errorf("scenario: approving %s: %w", requestID, err)
	}
	return Approved{Candidate: candidate, Request: req, Approval: mustJSON(a)}, nil
}

// ApproveAsWritten is Approve for a request that approve itself refuses
// (an intent id not in Unicode NFC, say): the unsigned approval binds the
// request's digest as written, so that only the gate's own checks can
// refuse the message. For tests that show they do.
func ApproveAsWritten(candidate []byte, requestID, intentID, title, approvalID string) (Approved, error) {
	a, err := Approve(candidate, requestID, "intent-as-written", title, approvalID)
	if err != nil {
		return Approved{}, err
	}
	if a.Request, err = Request(candidate, requestID, intentID, title); err != nil {
		return Approved{}, err
	}
	var approval document.Approval
	if err := json.Unmarshal(a.Approval, &approval); err != nil {
		return Approved{}, fmt.Errorf("scenario: reading the approval: %w", err)
	}
	if approval.Request.Digest, err = canon.Digest(a.Request); err != nil {
		return Approved{}, fmt.Errorf("scenario: digesting the request: %w", err)
	}
	a.Approval = mustJSON(approval)
	return a, nil
}

// Seed is the whole seed scenario.
type Seed struct {
	// Original: intent-0001, the seed title.
	Original Approved
	// Changed: intent-0001 again, a changed title, its own valid approval.
	Changed Approved
	// NewIntent: intent-0002, the same content as Original.
	NewIntent Approved

	key  *sign.Key
	opts approve.Options
	f    For
}

// Build returns the seed scenario with unsigned approvals, for the fake
// task service's default destination.
func Build() (*Seed, error) { return For{}.Build() }

// BuildSigned returns the seed scenario with approvals signed by key, made
// at approvedAt and valid for lifetime, for the fake task service's default
// destination.
func BuildSigned(key *sign.Key, approvedAt time.Time, lifetime time.Duration) (*Seed, error) {
	return For{}.BuildSigned(key, approvedAt, lifetime)
}

// Build returns the seed scenario with unsigned approvals, its requests for
// f's provider and destination.
func (f For) Build() (*Seed, error) { return f.build(approve.Options{}) }

// BuildSigned is Build with approvals signed by key, made at approvedAt
// and valid for lifetime.
func (f For) BuildSigned(key *sign.Key, approvedAt time.Time, lifetime time.Duration) (*Seed, error) {
	return f.build(approve.Options{Key: key, At: approvedAt, Lifetime: lifetime})
}

func (f For) build(o approve.Options) (*Seed, error) {
	c := Candidate()
	var s Seed
	var err error
	s.key, s.opts, s.f = o.Key, o, f
	with := func(id string) approve.Options { o.ID = id; return o }
	if s.Original, err = f.ApproveWith(c, "task-request-0001", "intent-0001", Title, with("approval-0001")); err != nil {
		return nil, err
	}
	if s.Changed, err = f.ApproveWith(c, "task-request-0002", "intent-0001", ChangedTitle, with("approval-0002")); err != nil {
		return nil, err
	}
	if s.NewIntent, err = f.ApproveWith(c, "task-request-0003", "intent-0002", Title, with("approval-0003")); err != nil {
		return nil, err
	}
	return &s, nil
}

// TestKey is the fixed reviewer key of the signed fixtures. Its private half
// is derived from a public phrase: it proves nothing and must never be
// trusted outside tests.
func TestKey() *sign.Key {
	seed := sha256.Sum256([]byte("sendtwice test reviewer-1, never to be trusted"))
	return sign.NewKey(ed25519.NewKeyFromSeed(seed[:]))
}

// Tampered is a message that the gate must stop at Check.
type Tampered struct {
	Name     string
	Envelope []byte
	Check    string
}

// TamperedCases returns the six tampered cases (the capability case twice:
// publish substituted and publish added) built from the original approval.
func (s *Seed) TamperedCases() []Tampered {
	o := s.Original
	env := func(c, r, a []byte) []byte { return Approved{c, r, a}.Envelope() }
	return []Tampered{
		{"no-approval", env(o.Candidate, o.Request, nil), "approval_format"},
		{"approval-of-another-kind", env(o.Candidate, o.Request, Edit(o.Approval, func(m map[string]any) {
			m["schema_version"] = "task-rejection.v1"
		})), "approval_format"},
		{"candidate-changed", env(Edit(o.Candidate, func(m map[string]any) {
			m["summary"] = "有人在會議中說會把通知設定整個重寫"
		}), o.Request, o.Approval), "candidate_binding"},
		{"source-version-changed", env(Edit(o.Candidate, func(m map[string]any) {
			m["source"].(map[string]any)["version"] = "v4"
		}), o.Request, o.Approval), "candidate_binding"},
		{"request-edited-after-approval", env(o.Candidate, Edit(o.Request, func(m map[string]any) {
			m["task"].(map[string]any)["title"] = "刪除通知設定"
		}), o.Approval), "request_binding"},
		{"capability-publish-substituted", env(o.Candidate, o.Request, s.resign(Edit(o.Approval, func(m map[string]any) {
			m["capabilities"] = []string{"publish"}
		}))), "capability"},
		{"capability-publish-added", env(o.Candidate, o.Request, s.resign(Edit(o.Approval, func(m map[string]any) {
			m["capabilities"] = []string{s.f.capability(), "publish"}
		}))), "capability"},
	}
}

// resign signs an edited approval again when the seed is signed: a trusted
// reviewer who signed a wrong capability is the capability check's case (an
// approval edited after signing is the signature check's).
func (s *Seed) resign(approval []byte) []byte {
	if s.key == nil {
		return approval
	}
	var a document.Approval
	if err := json.Unmarshal(approval, &a); err != nil {
		panic(err)
	}
	notAfter, err := time.Parse(time.RFC3339, a.NotAfter)
	if err != nil {
		panic(err)
	}
	if err := approve.Sign(&a, s.key, notAfter); err != nil {
		panic(err)
	}
	return mustJSON(a)
}

// Files returns the fixture files of the seed scenario, by path under testdata/.
func (s *Seed) Files() map[string][]byte {
	f := map[string][]byte{
		"seed/candidate.json":           s.Original.Candidate,
		"seed/request.json":             s.Original.Request,
		"seed/approval.json":            s.Original.Approval,
		"seed/request-changed.json":     s.Changed.Request,
		"seed/approval-changed.json":    s.Changed.Approval,
		"seed/request-new-intent.json":  s.NewIntent.Request,
		"seed/approval-new-intent.json": s.NewIntent.Approval,
		"seed/envelope.json":            indent(s.Original.Envelope()),
		"seed/envelope-changed.json":    indent(s.Changed.Envelope()),
		"seed/envelope-new-intent.json": indent(s.NewIntent.Envelope()),
	}
	for _, t := range s.TamperedCases() {
		f["tampered/"+t.Name+".json"] = indent(t.Envelope)
	}
	return f
}

// Generate returns the n-th generated approved request (n ≥ 1): its own
// intent id and request id, a title numbered n, for demos and load.
func Generate(candidate []byte, prefix string, n int) (Approved, error) {
	return For{}.Generate(candidate, prefix, n)
}

// Generate is the package's Generate for f's provider and destination.
func (f For) Generate(candidate []byte, prefix string, n int) (Approved, error) {
	return f.ApproveWith(candidate,
		fmt.Sprintf("task-request-%s-%06d", prefix, n),
		fmt.Sprintf("intent-%s-%06d", prefix, n),
		fmt.Sprintf("%s (#%d)", Title, n),
		approve.Options{By: Reviewer, At: ApprovedAt, ID: fmt.Sprintf("approval-%s-%06d", prefix, n)})
}

// Edit returns the JSON object doc with f applied to its members, indented.
// It is for fixtures and tests, which build their documents, so it panics if
// doc is not a JSON object.
func Edit(doc []byte, f func(m map[string]any)) []byte {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		panic(err)
	}
	f(m)
	return mustJSON(m)
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

func indent(b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		panic(err)
	}
	return mustJSON(v)
}

// SignedLifetime is the lifetime of the signed fixtures' approvals.
const SignedLifetime = 7 * 24 * time.Hour

// SignedFiles returns the signed fixtures, by path under testdata/: the seed
// approvals signed by TestKey, the tampered messages built from them, and a
// trusted-approvers file naming the test key.
func SignedFiles() (map[string][]byte, error) {
	k := TestKey()
	s, err := BuildSigned(k, ApprovedAt, SignedLifetime)
	if err != nil {
		return nil, err
	}
	f := map[string][]byte{
		"signed/approval.json":            s.Original.Approval,
		"signed/approval-changed.json":    s.Changed.Approval,
		"signed/approval-new-intent.json": s.NewIntent.Approval,
		"signed/trusted-approvers.json": mustJSON(map[string]any{
			"approvers": []sign.Approver{sign.ApproverFor(Reviewer, k.Public())},
		}),
	}
	for _, t := range s.TamperedCases() {
		f["signed/tampered/"+t.Name+".json"] = indent(t.Envelope)
	}
	return f, nil
}
