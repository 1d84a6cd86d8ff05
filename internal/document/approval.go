package document

// DecodeApproval decodes an approval from a value tree.
func DecodeApproval(path string, v any) (*Approval, error) {
	var r reader
	a := r.approval(path, v)
	return a, r.result()
}

// approval reads an approval's members.
func (r *reader) approval(path string, v any) *Approval {
	m := r.object(path, v, "schema_version", "approval_id", "approved_by", "approved_at", "candidate", "request", "capabilities",
		"key_id?", "not_after?", "signature?")
	if m == nil {
		return nil
	}
	r.schemaVersion(path, m, ApprovalVersion)
	a := &Approval{SchemaVersion: ApprovalVersion}
	a.ApprovalID = r.id(join(path, "approval_id"), m["approval_id"])
	a.ApprovedBy = r.text(join(path, "approved_by"), m["approved_by"], MaxIDBytes)
	a.ApprovedAt = r.timestamp(join(path, "approved_at"), m["approved_at"])
	a.Candidate.CandidateID, a.Candidate.Digest, a.Candidate.SourceVersion = r.candidatePointer(join(path, "candidate"), m["candidate"], "digest")
	qp := join(path, "request")
	if qm := r.object(qp, m["request"], "request_id", "digest"); qm != nil {
		a.Request.RequestID = r.id(join(qp, "request_id"), qm["request_id"])
		a.Request.Digest = r.digest(join(qp, "digest"), qm["digest"])
	}
	capp := join(path, "capabilities")
	caps := r.array(capp, m["capabilities"], 0)
	a.Capabilities = make([]string, 0, len(caps))
	for i, c := range caps {
		a.Capabilities = append(a.Capabilities, r.id(indexed(capp, i), c))
	}
	_, hasKey := m["key_id"]
	_, hasNotAfter := m["not_after"]
	_, hasSig := m["signature"]
	switch {
	case r.err != nil:
	case hasKey && hasNotAfter && hasSig:
		a.KeyID = r.id(join(path, "key_id"), m["key_id"])
		a.NotAfter = r.timestamp(join(path, "not_after"), m["not_after"])
		a.Signature = r.id(join(path, "signature"), m["signature"])
	case hasKey || hasNotAfter || hasSig:
		missing := "key_id"
		if !hasNotAfter {
			missing = "not_after"
		} else if !hasSig {
			missing = "signature"
		}
		if hasKey && !hasNotAfter {
			missing = "not_after"
		}
		r.fail(join(path, missing), RuleMissingMember, ErrMissingMember,
			"a signed approval carries key_id, not_after and signature together; %q is missing", missing)
	}
	if r.err != nil {
		return nil
	}
	return a
}
