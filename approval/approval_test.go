package approval_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/approval"
	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/send"
)

func candidate(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "seed", "candidate.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func request(t *testing.T, c []byte) []byte {
	t.Helper()
	r, err := approval.NewRequest(c, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Fix the checks"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The constants say their values in go doc; they must be the ones the
// module uses.
func TestTheConstantsAreTheModulesValues(t *testing.T) {
	if approval.DefaultLifetime != approve.DefaultLifetime || approval.DefaultProvider != document.ProviderFake {
		t.Fatalf("DefaultLifetime %s, DefaultProvider %q", approval.DefaultLifetime, approval.DefaultProvider)
	}
}

func TestNewRequest(t *testing.T) {
	c := candidate(t)
	for _, tc := range []struct {
		name      string
		candidate []byte
		r         approval.Request
		want      error
	}{
		{"a request for the candidate", c, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Fix the checks"}, nil},
		{"a request in a scope for a destination", c, approval.Request{RequestID: "task-request-0002", IntentID: "intent-0002", Scope: "team-a", Destination: "default", Title: "Fix"}, nil},
		{"a candidate that is not JSON", []byte("{"), approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "t"}, approval.ErrInvalid},
		{"a request without an intent id", c, approval.Request{RequestID: "task-request-0001", Title: "t"}, approval.ErrInvalid},
		{"a request without a title", c, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001"}, approval.ErrInvalid},
		{"an unknown provider", c, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "t", Provider: "nobody.v1"}, approval.ErrInvalid},
		{"a due date that is no date", c, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "t", DueAt: ptr("tomorrow")}, approval.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := approval.NewRequest(tc.candidate, tc.r)
			if tc.want != nil {
				mustBeOwn(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, err := approval.Digest(tc.candidate)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(r, []byte(d)) || !bytes.Contains(r, []byte(tc.r.IntentID)) {
				t.Fatalf("request %s does not name the candidate's digest %s", r, d)
			}
		})
	}
}

func TestNewCandidateMakesWhatTheExecutorsReadAndRefusesWhatTheyRefuse(t *testing.T) {
	good := approval.Candidate{
		CandidateID: "cand-0001", TranscriptID: "weekly-sync", TranscriptVersion: "v1", Kind: "commitment",
		Summary: "Add the missing checks", Evidence: []approval.Evidence{{Quote: "I'll add them", StartMS: 1000, EndMS: 2000}},
	}
	with := func(edit func(*approval.Candidate)) approval.Candidate {
		c := good
		c.Evidence = append([]approval.Evidence(nil), good.Evidence...)
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		c    approval.Candidate
		path string // in the refusal; "" for none
	}{
		{"a candidate with a quote", good, ""},
		{"a candidate without an id", with(func(c *approval.Candidate) { c.CandidateID = "" }), "$.candidate_id"},
		{"a candidate without a summary", with(func(c *approval.Candidate) { c.Summary = "" }), "$.summary"},
		{"a candidate without a quote", with(func(c *approval.Candidate) { c.Evidence = nil }), "$.evidence"},
		{"a quote that ends before it starts", with(func(c *approval.Candidate) { c.Evidence[0].EndMS = 10 }), "$.evidence[0].end_ms"},
		{"a candidate without its transcript's version", with(func(c *approval.Candidate) { c.TranscriptVersion = "" }), "$.source.version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := approval.NewCandidate(tc.c)
			if tc.path != "" {
				mustBeOwn(t, err, approval.ErrInvalid)
				if !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("%v does not name %s", err, tc.path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A request for it passes, signed, the executors' checks.
			key, err := approval.NewKey("alice")
			if err != nil {
				t.Fatal(err)
			}
			r := request(t, b)
			approved, err := approval.Approve(b, r, approval.Options{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			trusted, err := send.NewTrustedApprovers(key.Approver())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := send.Trusted(trusted).Documents(send.Documents{Candidate: b, Request: r, Approval: approved}); err != nil {
				t.Fatalf("the executors' checks refuse what NewCandidate made: %v", err)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// mustBeOwn fails unless err is the package's own: it matches want and
// starts "approval: ".
func mustBeOwn(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || !strings.HasPrefix(fmt.Sprint(err), "approval: ") {
		t.Fatalf("%v; want an error that starts approval: and matches %v", err, want)
	}
	var de *document.Error
	if errors.As(err, &de) {
		t.Fatalf("%v carries an internal type", err)
	}
}

func TestApprove(t *testing.T) {
	c := candidate(t)
	r := request(t, c)
	alice, err := approval.NewKey("alice")
	if err != nil {
		t.Fatal(err)
	}
	otherReq, err := approval.NewRequest(bytes.Replace(c, []byte(`"summary": "`), []byte(`"summary": "changed `), 1),
		approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Fix the checks"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	trusted, err := send.NewTrustedApprovers(alice.Approver())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		request  []byte
		o        approval.Options
		want     error
		signedBy string
	}{
		{"signed by the key's owner", r, approval.Options{Key: alice, At: at}, nil, "alice"},
		{"signed, the name given as the key's", r, approval.Options{Key: alice, By: "alice", At: at, Lifetime: time.Hour}, nil, "alice"},
		{"unsigned", r, approval.Options{By: "bob", At: at}, nil, ""},
		{"signed under another name", r, approval.Options{Key: alice, By: "mallory", At: at}, approval.ErrWrongSigner, ""},
		{"a request for another candidate", otherReq, approval.Options{Key: alice, At: at}, approval.ErrMismatch, ""},
		{"no reviewer", r, approval.Options{At: at}, approval.ErrInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := approval.Approve(c, tc.request, tc.o)
			if tc.want != nil {
				mustBeOwn(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			docs := send.Documents{Candidate: c, Request: tc.request, Approval: a}
			if _, err := send.Bindings().Documents(docs); err != nil {
				t.Fatalf("the executors' binding checks refuse the approval: %v", err)
			}
			v, err := send.Trusted(trusted).Documents(docs)
			if tc.signedBy == "" {
				var refused *send.Refusal
				if !errors.As(err, &refused) || refused.Check != send.CheckSignature {
					t.Fatalf("an unsigned approval: %v, %v; want a refusal at signature", v, err)
				}
				return
			}
			if err != nil || v.SignedBy != tc.signedBy {
				t.Fatalf("verdict %+v, %v; want signed by %s", v, err, tc.signedBy)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	_, err := approval.NewKey("../alice")
	mustBeOwn(t, err, approval.ErrInvalid)
	k, err := approval.NewKey("alice")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := k.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "alice.key")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file's mode is %v, want 0600", fi.Mode().Perm())
	}
	mustBeOwn(t, k.Save(dir), approval.ErrKey) // it refuses to overwrite a key file
	loaded, err := approval.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.ID() != k.ID() || loaded.Name() != "alice" || !loaded.PublicKey().Equal(k.PublicKey()) {
		t.Fatalf("loaded %v (%s), saved %v", loaded, loaded.Name(), k)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = approval.LoadKey(path) // others may read it
	mustBeOwn(t, err, approval.ErrKey)
	_, err = approval.LoadKey(filepath.Join(dir, "nobody.key"))
	mustBeOwn(t, err, approval.ErrKey)

	// The private key shows nowhere: not in the key's strings, not in an
	// error.
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	priv := parsed.(ed25519.PrivateKey)
	secrets := []string{hex.EncodeToString(priv.Seed()), base64.StdEncoding.EncodeToString(priv.Seed()), base64.RawURLEncoding.EncodeToString(priv.Seed()), string(block.Bytes)}
	_, wrong := approval.Approve(candidate(t), request(t, candidate(t)), approval.Options{Key: k, By: "mallory"})
	for _, s := range []string{k.String(), fmt.Sprintf("%v %+v %#v %s %x", k, k, k, k, k), fmt.Sprint(wrong)} {
		for _, secret := range secrets {
			if strings.Contains(s, secret) || strings.Contains(s, secret[:16]) {
				t.Fatalf("%q shows the private key", s)
			}
		}
	}
}
