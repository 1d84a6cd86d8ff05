// Package approve writes task-approval.v1 documents: a reviewer's decision
// bound to one candidate (its id, canonical digest and source version) and one
// request (its id and canonical digest), granting exactly the capability of
// the request's provider (document.CapabilityOf: create_fake_task for the
// fake task service, create_caldav_task, create_redmine_issue).
//
// It must never approve a request that does not point at the candidate being
// approved, and never write "approved" into the candidate itself: the approval
// is a separate document with its own digest. Write never hands out an
// approval that the gate's binding checks would refuse.
//
// It must never import the NATS client or Pebble: it writes documents and sends
// nothing.
package approve
