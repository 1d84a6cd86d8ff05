package redmine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sendtwice/sendtwice/taskservice"
)

// requestDoc is what the description reads of the task-request.v1
// document (Request.Request); everything is optional.
type requestDoc struct {
	RequestID    string `json:"request_id"`
	CandidateRef struct {
		CandidateID   string `json:"candidate_id"`
		SourceVersion string `json:"source_version"`
	} `json:"candidate_ref"`
	candidateText
	Candidate *candidateText `json:"candidate"`
}

// candidateText is the candidate's summary and evidence, where a document
// carries them.
type candidateText struct {
	Summary  string `json:"summary"`
	Evidence []struct {
		Quote   string `json:"quote"`
		StartMS *int64 `json:"start_ms"`
		EndMS   *int64 `json:"end_ms"`
	} `json:"evidence"`
}

// maxDescriptionBytes bounds the description.
const maxDescriptionBytes = 16 << 10

// description is the description: the candidate's summary and
// evidence when the request document carries them, then where the task
// comes from and what the mark is.
func description(req taskservice.Request) string {
	var doc requestDoc
	if len(req.Request) > 0 {
		_ = json.Unmarshal(req.Request, &doc) // an unreadable document only shortens the description
	}
	text := doc.candidateText
	if doc.Candidate != nil && (doc.Candidate.Summary != "" || len(doc.Candidate.Evidence) > 0) {
		text = *doc.Candidate
	}
	var b strings.Builder
	if s := strings.TrimSpace(text.Summary); s != "" {
		b.WriteString(s + "\n\n")
	}
	if len(text.Evidence) > 0 {
		b.WriteString("Evidence:\n")
		for _, e := range text.Evidence {
			q := strings.Join(strings.Fields(e.Quote), " ")
			if q == "" {
				continue
			}
			b.WriteString("> " + q)
			if e.StartMS != nil && e.EndMS != nil {
				b.WriteString(fmt.Sprintf(" (%s–%s)", clock(*e.StartMS), clock(*e.EndMS)))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	candidate, version := req.CandidateID, req.SourceVersion
	if candidate == "" {
		candidate = doc.CandidateRef.CandidateID
	}
	if version == "" {
		version = doc.CandidateRef.SourceVersion
	}
	requestID := req.RequestID
	if requestID == "" {
		requestID = doc.RequestID
	}
	var from []string
	if requestID != "" {
		from = append(from, "request "+requestID)
	}
	if candidate != "" {
		c := "candidate " + candidate
		if version != "" {
			c += " (transcript version " + version + ")"
		}
		from = append(from, c)
	}
	if req.ApprovedBy != "" {
		from = append(from, "approved by "+req.ApprovedBy)
	}
	if len(from) > 0 {
		b.WriteString("From " + strings.Join(from, ", ") + ".\n")
	}
	b.WriteString(fmt.Sprintf("Created by sendtwice for intent %s in scope %s; its custom field carries the key: leave it as it is, or a retry may create the issue again.\n", req.IntentID, req.KeyScope()))
	s := b.String()
	if len(s) > maxDescriptionBytes {
		s = strings.ToValidUTF8(s[:maxDescriptionBytes], "") + "…"
	}
	return s
}

// clock shows a position in a transcript as m:ss.
func clock(ms int64) string {
	if ms < 0 {
		ms = 0
	}
	s := ms / 1000
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
