package document

// DecodeRequest decodes a task request from a value tree.
func DecodeRequest(path string, v any) (*Request, error) {
	var r reader
	q := r.request(path, v)
	return q, r.result()
}

// request reads a task request's members.
func (r *reader) request(path string, v any) *Request {
	m := r.object(path, v, "schema_version", "request_id", "intent_id", "operation", "provider", "destination?", "scope?", "candidate_ref", "task")
	if m == nil {
		return nil
	}
	r.schemaVersion(path, m, RequestVersion)
	q := &Request{SchemaVersion: RequestVersion, Operation: OperationCreateTask}
	q.RequestID = r.id(join(path, "request_id"), m["request_id"])
	q.IntentID = r.intentID(join(path, "intent_id"), m["intent_id"])
	r.constant(join(path, "operation"), m["operation"], OperationCreateTask, RuleValue, ErrValue)
	q.Provider = r.provider(join(path, "provider"), m["provider"])
	if v, ok := m["destination"]; ok {
		q.Destination = r.destination(join(path, "destination"), v)
	}
	if v, ok := m["scope"]; ok {
		q.Scope = r.scope(join(path, "scope"), v)
	}
	r.keyFits(join(path, "intent_id"), q.KeyScope(), q.IntentID)
	ref := &q.CandidateRef
	ref.CandidateID, ref.CandidateDigest, ref.SourceVersion = r.candidatePointer(join(path, "candidate_ref"), m["candidate_ref"], "candidate_digest")
	tp := join(path, "task")
	if tm := r.object(tp, m["task"], "title", "assignee_person_ref", "due_at"); tm != nil {
		q.Task.Title = r.line(join(tp, "title"), tm["title"], MaxTitleBytes)
		q.Task.AssigneePersonRef = r.nullable(join(tp, "assignee_person_ref"), tm["assignee_person_ref"], r.id)
		q.Task.DueAt = r.nullable(join(tp, "due_at"), tm["due_at"], r.due)
	}
	if r.err != nil {
		return nil
	}
	return q
}

// candidatePointer reads an object that points at a candidate (a request's
// candidate_ref, an approval's candidate): its id, its digest (the member
// digestName) and its source version.
func (r *reader) candidatePointer(path string, v any, digestName string) (id, digest, sourceVersion string) {
	m := r.object(path, v, "candidate_id", digestName, "source_version")
	if m == nil {
		return "", "", ""
	}
	return r.id(join(path, "candidate_id"), m["candidate_id"]),
		r.digest(join(path, digestName), m[digestName]),
		r.id(join(path, "source_version"), m["source_version"])
}
