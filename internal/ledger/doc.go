// Package ledger is the executors' intent ledger on JetStream: a
// key-value bucket (Bucket) that remembers, for a task service that forgets
// a key when its task is deleted (a CalDAV collection), every key it has
// answered created or replayed, so that a resend after the owner deleted the
// task is answered replayed (task deleted) instead of creating the task
// again. It implements taskservice.Ledger; taskservice.KeepDeletedKeys
// composes it with the adapter.
//
// # Keys and values
//
// An entry's key is its scope, ".", and a token of its intent id: the
// intent id itself when it is 1 to 128 letters, digits, '-' and '_', else
// "=" and the 64 hexadecimal digits of its SHA-256 (the two forms never
// meet: '=' is not in the first). Scopes are one subject token of
// [a-z0-9_-] (document.ValidScope); a scope outside that form is refused.
// The value is JSON: the scope, the intent id, the request digest and task
// id of the first answer, and the latest not_after seen. Get checks that
// the value names the key it was read for.
//
// # Lifetime
//
// An entry lives exactly as long as its key may still be resent: until its
// latest not_after plus the clock allowance (DefaultClockAllowance: the
// executors' clocks may run behind) plus a margin (DefaultMargin), as a
// per-message TTL (nats-server 2.11 or later; the bucket is made with a
// limit-marker TTL, which enables it). An entry whose not_after is zero (an
// unsigned approval, accepted only in insecure mode) has no TTL and is kept
// forever. A later approval for the same key extends the entry (a new
// revision with a new TTL); an earlier one changes nothing. The binding
// (digest, task id) of the first entry is never changed.
//
// # Per-key locks
//
// The bucket also holds the per-key locks of adapters for services that
// keep no key (Redmine): (*Ledger).Lock implements taskservice.Locker. The
// lock of (scope, intent id) is the key "_lock.", the scope, ".", and the
// intent's token (LockKey; a scope never starts with '_', so a lock never
// meets an entry). Lock takes it with a create-only write carrying a
// per-key TTL (the lock's TTL rounded up to whole seconds, at least one):
// when the key exists another holder has it, and the error wraps
// taskservice.ErrLocked. The value says who holds it (a random holder id,
// the time it was taken and its TTL), for diagnostics only. Held answers
// taskservice.ErrLockLost when the key's latest revision is not the one
// the holder wrote (expired, released, taken by another) or when the TTL
// has run out by the holder's own clock. Release purges the key only if
// its latest revision is still the holder's (a conditional write), so a
// holder whose lock expired never removes the next holder's lock. Renew
// (taskservice.Renewer) writes the value again with a fresh TTL, on the
// same condition, so that a holder keeps its lock while its call runs.
//
// # In-doubt records
//
// Beside each lock, the bucket holds the key's in-doubt record
// ((*Ledger).Doubt, Doubted, Settle: taskservice.Doubts), written before a
// create whose outcome may stay unknown: the key "_doubt.", the scope, ".",
// and the intent's token (DoubtKey), written create-only with a per-key TTL
// of the service's longest request lifetime; its value says when the call
// started and until when it may land. Doubt finding a record writes
// nothing and returns it (taskservice.ErrInDoubt). A record lasts as long
// as the bucket keeps it: the server's TTL decides, not a reader's clock.
// Settle purges it, conditional on the revision it read.
//
// # The mark key
//
// The bucket holds the deployment's mark key under MarkKeyKey: 256 random
// bits, made once by the first executor that serves (a create-only write,
// so executors starting at once agree) and kept for ever. The adapters tag
// with it what names or marks a task (taskservice/internal/proof), so that
// a task can be told from one planted by a user of the task service. Who
// may read the bucket may read the key: the executors and the operator
// (deploy/auth), never a publisher.
//
// # Reading it whole
//
// Entries reads every entry (not the locks, the in-doubt records nor the
// mark key) for an audit, with the revision that last wrote each and when
// the bucket stored it, and says of a value that is not an entry of its key
// why not. It makes no consumer: it lists the bucket's keys from its
// stream's info and reads each key's latest revision, the same requests
// Open and Get make.
//
// # Traces
//
// Get, Lock, Put, Doubt, Doubted and Settle are each a span of the caller's
// trace ("ledger get", "ledger lock", "ledger put", "ledger doubt", "ledger
// doubted", "ledger settle") with the intent id and scope of the key, failed
// with the error the call returns.
//
// # Provisioning
//
// Ensure creates or updates the bucket, file storage, replicated like the
// streams; the executor provisions it beside the streams (serve, unless
// --no-provision, and provision), and Open only finds it.
//
// It must never import Pebble, nats-server or internal/executor: the
// executor keeps its ledger through it, not the other way round.
package ledger
