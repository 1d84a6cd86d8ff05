// Package ops serves a process's operational endpoints over HTTP:
//
//	/metrics  Prometheus metrics (text exposition format)
//	/healthz  liveness: 200 while the process is serving
//	/readyz   readiness: 200 when every registered check holds, else 503
//	          naming the checks that fail; ?verbose lists every check
//
// It listens only on the address it is given, and only when asked to.
//
// It must never change the process it reports on: its endpoints answer GET
// only and only read (the registry, the checks), and no check may run
// unbounded (each gets CheckTimeout). It serves no secrets and must never be
// the way into the process: no endpoint accepts a change.
//
// It must never import anything but the standard library and Prometheus:
// it knows nothing of the pipeline it reports on.
package ops
