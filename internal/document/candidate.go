package document

// DecodeCandidate decodes a candidate from a value tree; path names its place
// ("$" for a document of its own, "$.candidate" inside an envelope).
func DecodeCandidate(path string, v any) (*Candidate, error) {
	var r reader
	c := r.candidate(path, v)
	return c, r.result()
}

// candidate reads a candidate's members.
func (r *reader) candidate(path string, v any) *Candidate {
	m := r.object(path, v, "schema_version", "candidate_id", "source", "kind", "summary", "speaker_ref", "evidence")
	if m == nil {
		return nil
	}
	r.schemaVersion(path, m, CandidateVersion)
	c := &Candidate{SchemaVersion: CandidateVersion}
	c.CandidateID = r.id(join(path, "candidate_id"), m["candidate_id"])
	sp := join(path, "source")
	if sm := r.object(sp, m["source"], "transcript_id", "version"); sm != nil {
		c.Source.TranscriptID = r.id(join(sp, "transcript_id"), sm["transcript_id"])
		c.Source.Version = r.id(join(sp, "version"), sm["version"])
	}
	c.Kind = r.id(join(path, "kind"), m["kind"])
	c.Summary = r.text(join(path, "summary"), m["summary"], MaxTextBytes)
	c.SpeakerRef = r.nullable(join(path, "speaker_ref"), m["speaker_ref"], r.id)
	ep := join(path, "evidence")
	evidence := r.array(ep, m["evidence"], 1)
	if len(evidence) > MaxEvidence {
		r.fail(ep, RuleValue, ErrValue, "holds %d quotes; at most %d are allowed", len(evidence), MaxEvidence)
	}
	for i, e := range evidence {
		ip := indexed(ep, i)
		em := r.object(ip, e, "quote", "start_ms", "end_ms")
		if em == nil {
			break
		}
		ev := Evidence{
			Quote:   r.text(join(ip, "quote"), em["quote"], MaxTextBytes),
			StartMS: r.integer(join(ip, "start_ms"), em["start_ms"]),
			EndMS:   r.integer(join(ip, "end_ms"), em["end_ms"]),
		}
		if r.err == nil && ev.EndMS < ev.StartMS {
			r.fail(join(ip, "end_ms"), RuleValue, ErrValue, "must not be before start_ms")
		}
		c.Evidence = append(c.Evidence, ev)
	}
	if r.err != nil {
		return nil
	}
	return c
}
