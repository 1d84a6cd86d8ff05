package approval

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/send"
)

// Errors of the package; every error it returns matches one of them.
var (
	// ErrInvalid: a document, a field or a name is not what it must be; the
	// error names the field path and the reason.
	ErrInvalid = errors.New("approval: invalid")
	// ErrMismatch: the request does not point at this candidate (its id,
	// source version or digest).
	ErrMismatch = errors.New("approval: the request does not point at this candidate")
	// ErrWrongSigner: the approver's name is not the one the key was made
	// for; executors would reject the approval at signature.
	ErrWrongSigner = errors.New("approval: the approver is not the key's owner")
	// ErrKey: a key could not be made, read or written.
	ErrKey = errors.New("approval: unusable key")
)

// DefaultLifetime is how long a signed approval stays valid when Options
// name no NotAfter nor Lifetime.
const DefaultLifetime = 7 * 24 * time.Hour

// DefaultProvider is the provider of a Request that names none: the fake
// task service.
const DefaultProvider = "fake-task-provider.v1"

// own turns an internal error into one of the package's: its text, without
// its type, behind the sentinel that classifies it.
func own(sentinel error, doing string, err error) error {
	return fmt.Errorf("%w: %s: %s", sentinel, doing, err.Error())
}

// Digest returns a JSON document's digest as the executors compute it:
// "sha256:" and the hex SHA-256 of its RFC 8785 canonical form. A number
// that RFC 8785 would round is refused, as the executors refuse it.
func Digest(doc []byte) (string, error) {
	d, err := canon.DigestExact(doc)
	if err != nil {
		return "", own(ErrInvalid, "digesting the document", err)
	}
	return d, nil
}

// Candidate is an action candidate: what an application extracted from a
// transcript, with the quotes that show it.
type Candidate struct {
	// CandidateID names the candidate; a request points at it by this id.
	CandidateID string
	// TranscriptID and TranscriptVersion name the transcript it was read
	// from and that transcript's version.
	TranscriptID      string
	TranscriptVersion string
	// Kind says what sort of action it is ("commitment", "task").
	Kind    string
	Summary string
	// SpeakerRef names who spoke; nil stays null.
	SpeakerRef *string
	// Evidence holds at least one quote.
	Evidence []Evidence
}

// Evidence is one quote of the transcript and its time span in
// milliseconds.
type Evidence struct {
	Quote   string
	StartMS int64
	EndMS   int64
}

// NewCandidate makes an action-candidate.v1 document of c, checked as
// strictly as the executors read it: an error names the field path and the
// reason.
func NewCandidate(c Candidate) ([]byte, error) {
	evidence := make([]document.Evidence, 0, len(c.Evidence))
	for _, e := range c.Evidence {
		evidence = append(evidence, document.Evidence(e))
	}
	return encodeChecked("candidate", document.Candidate{
		SchemaVersion: document.CandidateVersion,
		CandidateID:   c.CandidateID,
		Source:        document.Source{TranscriptID: c.TranscriptID, Version: c.TranscriptVersion},
		Kind:          c.Kind,
		Summary:       c.Summary,
		SpeakerRef:    c.SpeakerRef,
		Evidence:      evidence,
	}, document.DecodeCandidate)
}

// encodeChecked encodes doc, indented, and reads it back with decode, as
// strictly as the executors read the document named what.
func encodeChecked[T any](what string, doc any, decode func(string, any) (*T, error)) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "R&D" as written: the digest is over the canonical form either way
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, own(ErrInvalid, "encoding the "+what, err)
	}
	b := buf.Bytes()
	v, err := document.Parse(b)
	if err == nil {
		_, err = decode("$", v)
	}
	if err != nil {
		return nil, own(ErrInvalid, "checking the "+what, err)
	}
	return b, nil
}

// Request is what a task request says beyond the candidate it points at.
type Request struct {
	RequestID string
	// IntentID is the key the task service remembers the task by: every
	// request for the same intent must carry the same one.
	IntentID string
	// Scope is the caller scope the intent id is a key in; "" is the
	// default scope.
	Scope string
	// Provider names the kind of task service (DefaultProvider when "");
	// Destination the place among those its executors serve ("" is
	// "default").
	Provider    string
	Destination string
	Title       string
	// AssigneePersonRef and DueAt stay null when nil; DueAt is an RFC 3339
	// date-time or a date (2026-12-24).
	AssigneePersonRef *string
	DueAt             *string
}

// NewRequest makes a task-request.v1 for the candidate: it names the
// candidate's id, source version and digest, and the fields of r. It is
// checked as strictly as the executors read it.
func NewRequest(candidate []byte, r Request) ([]byte, error) {
	cv, err := document.Parse(candidate)
	if err != nil {
		return nil, own(ErrInvalid, "reading the candidate", err)
	}
	c, err := document.DecodeCandidate("$", cv)
	if err != nil {
		return nil, own(ErrInvalid, "reading the candidate", err)
	}
	d, err := canon.DigestTree(cv)
	if err != nil {
		return nil, own(ErrInvalid, "digesting the candidate", err)
	}
	provider := r.Provider
	if provider == "" {
		provider = DefaultProvider
	}
	return encodeChecked("request", document.Request{
		SchemaVersion: document.RequestVersion,
		RequestID:     r.RequestID,
		IntentID:      r.IntentID,
		Operation:     document.OperationCreateTask,
		Provider:      provider,
		Destination:   r.Destination,
		Scope:         r.Scope,
		CandidateRef:  document.CandidateRef{CandidateID: c.CandidateID, CandidateDigest: d, SourceVersion: c.Source.Version},
		Task:          document.Task{Title: r.Title, AssigneePersonRef: r.AssigneePersonRef, DueAt: r.DueAt},
	}, document.DecodeRequest)
}

// Key is a reviewer's Ed25519 signing key and the name it was made for. Its
// String never shows the private key.
type Key struct {
	k *sign.Key
}

// NewKey makes a new random key for the reviewer name (1 to 64 letters,
// digits, dots, underscores or dashes, starting with a letter or a digit).
func NewKey(name string) (*Key, error) {
	if !sign.ValidName(name) {
		return nil, fmt.Errorf("%w: reviewer name %q: use 1 to 64 letters, digits, dots, underscores or dashes, starting with a letter or a digit", ErrInvalid, name)
	}
	k, err := sign.Generate()
	if err != nil {
		return nil, own(ErrKey, "making a key", err)
	}
	k.Name = name
	return &Key{k: k}, nil
}

// LoadKey reads a private key file (NAME.key, as Save and publisher keygen
// write it). It refuses a file that others than its owner may read.
func LoadKey(path string) (*Key, error) {
	k, err := sign.LoadKey(path)
	if err != nil {
		return nil, own(ErrKey, "reading "+path, err)
	}
	return &Key{k: k}, nil
}

// Save writes NAME.key (mode 0600) and NAME.pub in dir, as publisher keygen
// does. It refuses to overwrite a key file.
func (k *Key) Save(dir string) error {
	if _, err := sign.WriteKeyPair(dir, k.k.Name, k.k); err != nil {
		return own(ErrKey, "writing the key pair", err)
	}
	return nil
}

// Name is the reviewer's name the key was made for; "" for an old key file
// that records none.
func (k *Key) Name() string { return k.k.Name }

// ID is the key id an approval signed with the key carries.
func (k *Key) ID() string { return k.k.ID }

// PublicKey is the key's public half.
func (k *Key) PublicKey() ed25519.PublicKey { return k.k.Public() }

// Approver is the key's entry for the executors' trusted approvers, allowed
// to approve requests in the given scopes (none: only the default scope;
// "*" alone: every scope).
func (k *Key) Approver(scopes ...string) send.Approver {
	return send.Approver{Name: k.k.Name, PublicKey: k.k.Public(), Scopes: scopes}
}

// String names the key by its id.
func (k *Key) String() string { return "approval.Key(" + k.k.ID + ")" }

// GoString names the key by its id.
func (k *Key) GoString() string { return k.String() }

// Options say who approves, when, under which id, and with which key.
type Options struct {
	// By is the reviewer's name; with a Key it defaults to the key's name,
	// and another name is refused (ErrWrongSigner).
	By string
	// At is the approval time; zero means now.
	At time.Time
	// ID is the approval id; "" makes one from the request's digest and
	// the time, so that two approvals of one request differ.
	ID string
	// Key signs the approval, valid until NotAfter (or At + Lifetime, or
	// At + DefaultLifetime). Without a key the approval is unsigned, and
	// only executors in insecure mode accept it.
	Key      *Key
	NotAfter time.Time
	Lifetime time.Duration
}

// Approve approves the request for the candidate and returns the
// task-approval.v1 (indented JSON): it binds both by their digests, grants
// the request's provider's capability, and with a key signs it. It checks
// the three documents together as the executors' binding checks do.
func Approve(candidate, request []byte, o Options) ([]byte, error) {
	opts := approve.Options{By: o.By, At: o.At, ID: o.ID, NotAfter: o.NotAfter, Lifetime: o.Lifetime}
	if o.Key != nil {
		opts.Key = o.Key.k
	}
	_, b, err := approve.Write(candidate, request, opts)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, approve.ErrMismatch):
		return nil, own(ErrMismatch, "approving", err)
	case errors.Is(err, sign.ErrWrongSigner):
		return nil, own(ErrWrongSigner, "approving", err)
	}
	return nil, own(ErrInvalid, "approving", err)
}
