// Package gate decides whether an approved request may be sent to the task
// service at all. It recomputes digests and checks, in a fixed order, that the
// message is a strict envelope, delivered on its own intent's approvals
// subject when the subject is given (envelope), that it carries a task-approval.v1
// (approval_format), that a trusted reviewer signed exactly this approval
// (signature) and that it has not expired (expiry), that the approval binds
// exactly this candidate and this request (candidate_binding,
// request_binding), that it grants exactly the capability of the
// request's provider (capability: create_fake_task for
// fake-task-provider.v1, create_caldav_task for caldav-task.v1,
// create_redmine_issue for redmine-issue.v1), that the executor serves the
// request's provider and destination (destination: Checker.Serves; a
// request naming none is for document.DefaultDestination), and that the signer's trusted-approvers entry
// names the request's caller scope (scope; a request naming none is in
// document.DefaultScope). It stops at the first failure with an *Error
// naming the check, the field path and a reason. An unsigned approval,
// accepted only by a Checker with AllowUnsigned, names no signer: it skips
// scope as it skips signature and expiry.
//
// It has two modes, each called by name. A *Checker (trusted approvers, or
// unsigned approvals allowed explicitly) runs every check; CheckBindings,
// CheckDeliveryBindings and CheckDocumentBindings run the checks that need
// no keys (neither signature, expiry, destination nor scope), for local checks and
// audits without the trusted approvers. A nil *Checker runs nothing and
// returns ErrNoChecker.
//
// The gate is pure: it reads documents and returns a verdict; its clock is
// injected. It must never call the task service or the network, or let a message through
// that the strict decoder refused, never choose a weaker mode because a
// policy was left out, and never import anything of NATS: the delivery's
// subject is compared by name (package subjects). It answers "may this call be made"; it does
// not answer "was this already done", which is the task service's job.
package gate
