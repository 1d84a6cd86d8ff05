// Package metrics defines the Prometheus metrics of the executor and the task
// service, all named sendtwice_*:
//
//	sendtwice_requests_received           gauge    the task service's counter (service, and embedded executors)
//	sendtwice_creates_executed            gauge    the task service's counter
//	sendtwice_tasks_existing              gauge    the task service's counter
//	sendtwice_scope_requests_received{scope} gauge the task service's counters per scope (service, and embedded executors):
//	sendtwice_scope_creates_executed{scope}        at most N scope labels (--metrics-max-scopes), the
//	sendtwice_scope_tasks_existing{scope}          other scopes summed under scope="_other"
//	sendtwice_scope_keys_live{scope}
//	sendtwice_keys_live                   gauge    keys (scope, intent id) the task service keeps
//	sendtwice_keys_compacted              gauge    keys it forgot after their approvals expired
//	sendtwice_tasks_deleted               gauge    tasks their owners deleted (creates - deleted = existing)
//	sendtwice_receipts_total{outcome}     counter  receipts this executor stored, by outcome
//	sendtwice_gate_rejections_total{check} counter messages this executor refused, by gate check
//	sendtwice_redeliveries_total          counter  handlings of a message delivered more than once
//	sendtwice_retries_total               counter  deliveries given back for a later attempt (nak)
//	sendtwice_processing_seconds          histogram from a delivery's arrival to its receipt being stored and acked
//	sendtwice_consumer_lag                gauge    the shared consumer's pending plus ack-pending messages
//
// The three service counters keep the names used everywhere else (receipts,
// --json outputs). They are exposed as gauges read from the service's store
// at scrape time: they are exact and survive restarts, so they are the
// service's own figures rather than counts this process made since it
// started. requests_received and creates_executed never decrease.
//
// It only counts what it is told: it must never decide anything, never
// change what it observes, and never import internal/gate: GateChecks names the
// checks, and a test holds them equal to the gate's. It reads the task
// service's counters through the function it is given, never by a call of
// its own.
package metrics
