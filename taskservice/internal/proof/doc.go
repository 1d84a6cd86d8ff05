// Package proof makes and checks the tags that say a task was made by a
// deployment's executors: an HMAC-SHA256, under the deployment's mark key,
// of a purpose and the parts it binds (a scope, an intent id, a request
// digest). The task service adapters (taskservice/caldav and
// taskservice/redmine) write a tag into what names or marks a task, so that
// nobody without the key can name a future task or forge a mark.
//
// It must never import NATS or Pebble. A tag is compared in constant time
// and never logged with its key; a key is never shown.
package proof
