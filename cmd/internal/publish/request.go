package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/sendtwice/sendtwice/approval"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
)

// RequestHelp is request's usage.
const RequestHelp = `request --intent ID --title TEXT [--assignee REF] [--due DATE] [--scope SCOPE]
        [--provider fake|caldav|redmine] [--destination NAME] [--out DIR] [--force]

Writes a task request and the candidate it points at, so that a task needs no JSON written by
hand: DIR/request.json, a task-request.v1 that creates the task TEXT keyed by the intent id ID,
and DIR/candidate.json, an action-candidate.v1 whose summary and one quote are TEXT (its source
is publisher-request: typed here, not read from a transcript). Approve them with publisher
approve, then send them with publisher send (the output says how).

--provider must name the task service the executors call (their --task-service): fake
(fake-task-provider.v1, the default), caldav (caldav-task.v1) or redmine (redmine-issue.v1); an
executor refuses a request for another at the check destination, and so it refuses the seed
request, which is for the fake service. --destination is one of the places those executors
serve (a calendar, a project; none: default). --scope is the caller scope in which ID is a key
(none: default); the reviewer's key must be allowed that scope.

Each value is checked as the executors' gate and the task services check it, and nothing is
written when one is refused: ID 1 to 256 bytes without spaces, in Unicode NFC, and with SCOPE
short enough to name a CalDAV resource (for every service); TEXT one line of at most 1024
bytes; REF (a person) without spaces; DATE a day (2026-12-24) or an RFC 3339 date-time, from
1970-01-01 on; SCOPE and NAME lower-case letters, digits, '-' and '_'. The same flags write the same bytes, so a request written again keeps its
digest and its approval. Existing files are kept unless --force.

Exit status: 0 written; 1 error (a file exists, or cannot be written); 2 usage or a refused value.`

// RequestConfig is request's flags, as given.
type RequestConfig struct {
	fs                                  *flag.FlagSet
	intent, title, assignee, due, scope *string
	provider, destination, out          *string
	force                               *bool
}

// RequestFlagsVar defines request's flags on fs.
func RequestFlagsVar(fs *flag.FlagSet) *RequestConfig {
	return &RequestConfig{
		fs:          fs,
		intent:      fs.String("intent", "", "the intent `ID`: the key the task is created under, once (required)"),
		title:       fs.String("title", "", "the task's title, one line of `TEXT` (required)"),
		assignee:    fs.String("assignee", "", "a reference to the person the task is for, `REF` (none: null)"),
		due:         fs.String("due", "", "when the task is due: a `DATE` (2026-12-24) or an RFC 3339 date-time (none: null)"),
		scope:       fs.String("scope", "", "the caller `SCOPE` in which the intent id is a key (none: default)"),
		provider:    fs.String("provider", "fake", "the task service the request is for, `SERVICE`: fake, caldav or redmine"),
		destination: fs.String("destination", "", "the destination `NAME` among those the executors serve (none: default)"),
		out:         fs.String("out", ".", "`DIR` to write candidate.json and request.json in"),
		force:       fs.Bool("force", false, "replace candidate.json and request.json when they exist"),
	}
}

// requestFlagOf names the flag that gave the value at a request's path.
var requestFlagOf = map[string]string{
	"$.intent_id": "intent", "$.task.title": "title", "$.task.assignee_person_ref": "assignee",
	"$.task.due_at": "due", "$.scope": "scope", "$.destination": "destination",
	"$.summary": "title", "$.evidence[0].quote": "title",
}

// Request runs request with its parsed flags.
func Request(cf *RequestConfig, stdout io.Writer) error {
	if cf.fs.NArg() != 0 {
		return cli.UsageError(cf.fs, "unexpected argument %q", cf.fs.Arg(0))
	}
	for _, required := range []struct{ flag, value string }{{"--intent ID", *cf.intent}, {"--title TEXT", *cf.title}} {
		if required.value == "" {
			return cli.UsageError(cf.fs, "%s is required", required.flag)
		}
	}
	provider, ok := providerNamed(*cf.provider)
	if !ok {
		return cli.UsageError(cf.fs, "--provider %q: want fake, caldav or redmine (or %s)", *cf.provider, strings.Join(document.ProviderNames(), ", "))
	}
	candidate, request, req, err := cf.documents(provider)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("%w; nothing written", err)}
	}
	paths, err := writeNew(*cf.out, *cf.force, map[string][]byte{"candidate.json": candidate, "request.json": request})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s: request %s for intent %s in scope %s, provider %s, destination %s\n",
		paths["candidate.json"], paths["request.json"], req.RequestID, req.IntentID, req.KeyScope(), req.Provider, req.DestinationName())
	fmt.Fprintf(stdout, "next: publisher approve --candidate %s --request %s --key KEYFILE -o %s\n",
		paths["candidate.json"], paths["request.json"], filepath.Join(*cf.out, "approval.json"))
	fmt.Fprintf(stdout, "then: publisher send --candidate %s --request %s --approval %s --wait 30s\n",
		paths["candidate.json"], paths["request.json"], filepath.Join(*cf.out, "approval.json"))
	return nil
}

// providerNamed is the provider a --provider value names: its short name
// or the provider's own.
func providerNamed(s string) (string, bool) {
	short := map[string]string{"fake": document.ProviderFake, "caldav": document.ProviderCalDAV, "redmine": document.ProviderRedmine}
	if p, ok := short[s]; ok {
		return p, true
	}
	_, known := document.CapabilityOf(s)
	return s, known
}

// documents makes the candidate and the request, and checks each as the
// gate's strict decoder reads it and as the task service would take its
// key. An error names the flag, the member and the reason.
func (cf *RequestConfig) documents(provider string) (candidate, request []byte, req *document.Request, err error) {
	intent, title := *cf.intent, *cf.title
	for name, v := range map[string]string{"intent": intent, "title": title, "assignee": *cf.assignee, "due": *cf.due,
		"scope": *cf.scope, "destination": *cf.destination} {
		// JSON would write U+FFFD for each bad byte: another value.
		if !utf8.ValidString(v) {
			return nil, nil, nil, fmt.Errorf("--%s is not valid UTF-8", name)
		}
	}
	cand := approval.Candidate{CandidateID: "candidate", TranscriptID: "publisher-request", TranscriptVersion: "v1",
		Kind: "task", Summary: title, Evidence: []approval.Evidence{{Quote: title}}}
	r := document.Request{
		SchemaVersion: document.RequestVersion,
		RequestID:     "request",
		IntentID:      intent,
		Operation:     document.OperationCreateTask,
		Provider:      provider,
		Destination:   *cf.destination,
		Scope:         *cf.scope,
		Task:          document.Task{Title: title, AssigneePersonRef: orNull(*cf.assignee), DueAt: orNull(*cf.due)},
	}
	// The request is checked first, with stand-ins for the ids and the
	// candidate digest, so that a refusal names the member a flag gave.
	r.CandidateRef = document.CandidateRef{CandidateID: cand.CandidateID, SourceVersion: cand.TranscriptVersion,
		CandidateDigest: "sha256:" + strings.Repeat("0", 64)}
	if request, err = indented(r); err == nil {
		_, err = decodeAs(request, document.DecodeRequest)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	cand.CandidateID, r.RequestID = idFor("candidate-", intent), idFor("request-", intent)
	r.CandidateRef.CandidateID = cand.CandidateID
	if candidate, err = approval.NewCandidate(cand); err != nil {
		return nil, nil, nil, fmt.Errorf("making the candidate: %w", err)
	}
	if r.CandidateRef.CandidateDigest, err = canon.Digest(candidate); err != nil {
		return nil, nil, nil, fmt.Errorf("digesting the candidate: %w", err)
	}
	if request, err = indented(r); err == nil {
		req, err = decodeAs(request, document.DecodeRequest)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return candidate, request, req, nil
}

// decodeAs decodes the document b with decode, as the gate does; a
// refusal names the flag that gave the refused value.
func decodeAs[T any](b []byte, decode func(string, any) (*T, error)) (*T, error) {
	tree, err := document.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("reading what was made: %w", err)
	}
	out, err := decode("$", tree)
	var de *document.Error
	if errors.As(err, &de) {
		if name, ok := requestFlagOf[de.Path]; ok {
			return nil, fmt.Errorf("--%s: the gate refuses %s: %s (rule %s)", name, strings.TrimPrefix(de.Path, "$."), de.Reason, de.Rule)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checking what was made: %w", err)
	}
	return out, nil
}

// indented is v as indented JSON, with <, > and & as they are.
func indented(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding the document: %w", err)
	}
	return b.Bytes(), nil
}

// orNull is nil for an empty flag, which the documents write as null.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// idFor names a document after its intent: prefix and the intent id, or
// for an intent id too long for that, prefix and the start of its digest.
func idFor(prefix, intent string) string {
	if id := prefix + intent; len(id) <= document.MaxIDBytes {
		return id
	}
	sum := sha256.Sum256([]byte(intent))
	return prefix + hex.EncodeToString(sum[:8])
}
