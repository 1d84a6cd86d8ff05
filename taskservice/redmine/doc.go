// Package redmine is a task service adapter for Redmine, a tracker that
// keeps no idempotency key and has no create-if-absent: every POST makes a
// new issue. The adapter marks every issue it creates with its key (scope
// and intent id) and request digest in a custom field, looks the key up
// before a create, and holds a per-key lock (taskservice.Locker) across the
// lookup and the create, so that two callers never both create.
//
// It must never import anything of NATS or Pebble, nor any package of this
// module but taskservice: an application uses it without internal/.
package redmine
