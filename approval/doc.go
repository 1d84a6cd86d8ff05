// Package approval makes what an application sends: a task request for an
// action candidate, the documents' digests, and a reviewer's approval,
// signed with the reviewer's key. It also makes and reads reviewers' keys,
// and gives the public half as a send.Approver for the executors' trusted
// approvers.
//
//	key, err := approval.NewKey("alice")
//	request, err := approval.NewRequest(candidate, approval.Request{
//		RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Fix the checks",
//	})
//	approved, err := approval.Approve(candidate, request, approval.Options{Key: key})
//	env, err := send.Build(send.Documents{Candidate: candidate, Request: request, Approval: approved})
//
// An approval it returns passes the gate's binding checks together with its
// candidate and request, as an executor runs them. Its errors are its own,
// prefixed "approval: ", and classify with errors.Is.
//
// A private key stays in its Key: Save writes its file readable by its
// owner alone (mode 0600), and no string, error or log shows it.
package approval
