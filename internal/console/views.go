package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"time"
	"unicode"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/send"
)

type listView struct {
	Awaiting, Approved []listRow
}

type listRow struct {
	Item       *Item
	URL        string
	ApprovedBy string
	Last       resultView // zero when nothing was sent
}

type reviewView struct {
	Item      *Item
	URL       string
	By        string
	FormError string
	// Approval is the kept approval, nil before the first press.
	Approval *document.Approval
	// CandidateChanged and RequestChanged say that a file differs from
	// what the kept approval names.
	CandidateChanged, RequestChanged bool
	// Expired says that the kept approval's not_after has passed.
	Expired bool
	// KeyOwner is the only name approvals may be made in (the signing
	// key's), KeyID the signing key's id; both empty without a key.
	KeyOwner, KeyID string
	Focus           *resultView
	Sends           []resultView
}

// resultView is one send as the result panel and the table row show it.
type resultView struct {
	N          int
	At         time.Time
	ItemURL    string
	URL        string
	EventsURL  string
	WaitURL    string
	ApprovalID string
	StreamSeq  uint64
	// TraceID is the send's trace, TraceURL the link to it (--trace-url);
	// each empty when there is none.
	TraceID, TraceURL string

	// Exactly one of these holds.
	Refused    *refusal
	Unsendable string
	Failed     string
	Receipt    *send.Receipt
	Pending    bool
	WaitErr    string

	RawReceipt string
	// The digests the approval names and those sent, for a refusal.
	ApprovedCandidate, SentCandidate string
	ApprovedRequest, SentRequest     string
}

// State is a short word for the send's state, used as data-outcome.
func (v resultView) State() string {
	switch {
	case v.Receipt != nil:
		return string(v.Receipt.Outcome)
	case v.Refused != nil:
		return "refused"
	case v.Failed != "" || v.Unsendable != "":
		return "failed"
	case v.Pending:
		return "pending"
	}
	return "no-receipt"
}

// refusal is a gate refusal in plain words.
type refusal struct {
	Check, Path, Reason string
	Plain               string
	Advice              string
}

func (c *Console) resultView(s *Send, k *kept) resultView {
	v := resultView{
		N:                 s.N,
		At:                s.At,
		ItemURL:           itemURL(s.Item),
		URL:               sendURL(s.Item, s.N),
		ApprovalID:        s.ApprovalID,
		StreamSeq:         s.Sent.StreamSeq,
		Unsendable:        s.Unsendable,
		Failed:            s.Failed,
		ApprovedCandidate: s.ApprovedCandidate,
		ApprovedRequest:   s.ApprovedRequest,
		SentCandidate:     s.SentCandidate,
		SentRequest:       s.SentRequest,
		TraceID:           s.TraceID,
		TraceURL:          traceURL(c.cfg.TraceURL, s.TraceID),
	}
	v.EventsURL = v.URL + "/events"
	v.WaitURL = v.URL + "?wait=1#result"
	if s.Refused != nil {
		v.Refused = explain(s.Refused.Check, s.Refused.Path, s.Refused.Reason)
		v.Refused.Advice = adviceLocal(s.Refused.Check)
		return v
	}
	if !s.Published() {
		return v
	}
	st := s.status()
	switch {
	case st.Receipt != nil:
		v.Receipt = st.Receipt
		v.RawReceipt = indentJSON(st.Receipt.Raw)
		if r := v.Receipt.Rejection; r != nil {
			v.Refused = explain(r.Check, r.Path, r.Reason)
		}
	case st.Waiting:
		v.Pending = true
	case st.WaitErr != "":
		v.WaitErr = st.WaitErr
	default:
		// Published, no wait running and none has ended: one is about
		// to start (watch was not called yet).
		v.Pending = true
	}
	return v
}

// explain puts a gate refusal in plain words.
func explain(check, path, reason string) *refusal {
	r := &refusal{Check: check, Path: path, Reason: reason}
	switch check {
	case "envelope":
		r.Plain = "the documents are not well-formed, so they cannot be checked"
	case "approval_format":
		r.Plain = "there is no valid approval for this request"
	case "signature":
		r.Plain = "the approval's signature is missing or does not verify"
	case "expiry":
		r.Plain = "the approval is no longer valid"
	case "candidate_binding":
		switch path {
		case "$.candidate":
			r.Plain = "the candidate changed after it was approved"
		case "$.candidate.source.version":
			r.Plain = "the candidate now comes from another version of the transcript than the one approved"
		default:
			r.Plain = "the approval is for a different candidate"
		}
	case "request_binding":
		switch path {
		case "$.request":
			r.Plain = "the request was edited after it was approved"
		case "$.approval.request.request_id":
			r.Plain = "the approval is for a different request"
		default:
			r.Plain = "the request does not point at this candidate"
		}
	case "capability":
		r.Plain = "the approval grants something other than creating one task"
	case "scope":
		r.Plain = "the approver is not trusted to approve requests for this request's scope"
	default:
		r.Plain = "the gate refused the message"
	}
	return r
}

// adviceLocal says what to do after the console's own gate check refused.
func adviceLocal(check string) string {
	switch check {
	case "expiry":
		return "An approval is valid only until its not_after; executors refuse it after that. Discard this approval and approve again: a new one is valid for --valid-for from when it is made."
	case "signature":
		return "Executors would refuse this approval too: it must be signed by a key in the trusted approvers, in the name they give that key. Check --key, --by and --trusted-approvers, discard this approval and approve again."
	case "scope":
		return "Executors would refuse this approval too: the trusted approvers do not let its approver approve requests for this scope. Ask a reviewer trusted for the scope to approve it, or have the trusted-approvers file grant the scope (publisher trust --scope)."
	case "candidate_binding", "request_binding":
		return "The approval covers the documents as they were when they were approved, so it cannot be used for the files as they are now. Review them again: discard this approval, and approve again once the request is proposed from the current candidate."
	}
	return "Fix the documents, then review them again."
}

func itemURL(name string) string { return "/c/" + url.PathEscape(name) }

func sendURL(name string, n int) string { return fmt.Sprintf("%s/sends/%d", itemURL(name), n) }

func indentJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// textLang guesses the language tag of a free text field for assistive
// technology: "ja" with kana, "ko" with hangul, "zh" with han only, else
// "" (the page's own language).
func textLang(s string) string {
	han := false
	for _, r := range s {
		switch {
		case unicode.In(r, unicode.Hiragana, unicode.Katakana):
			return "ja"
		case unicode.Is(unicode.Hangul, r):
			return "ko"
		case unicode.Is(unicode.Han, r):
			han = true
		}
	}
	if han {
		return "zh"
	}
	return ""
}

// span formats an evidence time span, m:ss.s–m:ss.s.
func span(startMS, endMS int64) string {
	f := func(ms int64) string {
		tenths := (ms + 50) / 100
		return fmt.Sprintf("%d:%02d.%d", tenths/600, tenths%600/10, tenths%10)
	}
	return f(startMS) + "–" + f(endMS)
}

var funcs = template.FuncMap{
	"lang": textLang,
	"span": span,
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"isoTime": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}

// parseTemplates parses the layout and partials once for each page.
func parseTemplates() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("console: parsing templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, p := range []string{"list", "review", "error"} {
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(templateFS, "templates/"+p+".html")
		}
		if err != nil {
			return nil, fmt.Errorf("console: parsing templates: %w", err)
		}
		pages[p] = t
	}
	return pages, nil
}
