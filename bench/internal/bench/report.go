package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
)

// memoryFigure is the task service process's resident memory after the
// measurements on one store.
type memoryFigure struct {
	preload   int
	after     string // the measurements the service had served
	now, peak int64
}

// report collects a run's figures and prints them.
type report struct {
	o       *Options
	started time.Time
	naive   *reference
	batched *reference // the JetStream part of the design alone
	pebble  *reference
	// ledger is the conventional design (JetStream + PostgreSQL); when
	// it was not measured, ledgerSkipped says why.
	ledger        *ledgerRun
	ledgerSkipped string
	drains        []*drainResult
	lives         []*liveResult
	memory        []memoryFigure
	stages        []stageTime
}

func (r *report) ok() bool {
	for _, d := range r.drains {
		if d.check == nil || !d.check.ok() {
			return false
		}
	}
	for _, l := range r.lives {
		if l.check == nil || !l.check.ok() {
			return false
		}
	}
	return true
}

// ledgerRef is the ledger reference's figure, nil when it was not measured.
func (r *report) ledgerRef() *reference {
	if r.ledger == nil {
		return nil
	}
	return r.ledger.ref
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// write prints the report: the run's setting, the references, the drains,
// the live runs, the service's memory, any failed check and the time per
// stage.
func (r *report) write(w io.Writer) {
	r.writeHeader(w)
	r.writeReferences(w)
	r.writeDrains(w)
	r.writeLives(w)
	r.writeMemory(w)
	r.writeFailures(w)
	r.writeStages(w)
}

// writeHeader prints what was measured where, with which workload.
func (r *report) writeHeader(w io.Writer) {
	o := r.o
	where := "server " + cli.RedactURL(o.Server)
	if o.Embedded {
		where = "embedded NATS server (JetStream file storage, fsync before every ack) and task service"
		if o.ServiceProcess != nil {
			where += " (in its own process)"
		}
	}
	if o.CalDAV != "" {
		where += "; the executors call the CalDAV collection " + cli.RedactURL(o.CalDAV) + " instead of the task service"
	}
	signed := "signed (Ed25519, checked by the gate)"
	if o.Unsigned {
		signed = "unsigned"
	}
	fmt.Fprintf(w, "sendtwice bench %s — %s\n", o.Mode, r.started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "machine:   %s\n", machine())
	fmt.Fprintf(w, "against:   %s\n", where)
	fmt.Fprintf(w, "workload:  resend %.0f%%, conflict %.0f%%, approvals %s, backlog stored in atomic batches of %d\n",
		o.Resend*100, o.Conflict*100, signed, o.PublishBatch)
	batch := o.ReceiptBatch
	if batch <= 0 {
		batch = 1000
	}
	fmt.Fprintf(w, "executors: %d handlers each, receipts in atomic batches of up to %d\n", o.Concurrency, batch)
}

// writeReferences prints the references measured, and the ledger's check
// or why it was skipped.
func (r *report) writeReferences(w io.Writer) {
	if r.naive == nil && r.batched == nil && r.pebble == nil && r.ledger == nil && r.ledgerSkipped == "" {
		return
	}
	tw := newTable(w, "\nreferences (this run, this server, same message size and concurrency):")
	for _, ref := range []*reference{r.naive, r.batched, r.pebble, r.ledgerRef()} {
		if ref == nil {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d in %s\t%s %s\t%s\n", ref.name, ref.n, ref.took.Round(time.Millisecond), thousands(ref.rate()), ref.unit, ref.what)
	}
	tw.Flush()
	if r.ledger != nil {
		fmt.Fprintf(w, "  (ledger check: %s)\n", r.ledger.summary())
	}
	if r.ledgerSkipped != "" {
		fmt.Fprintf(w, "  JetStream + PostgreSQL ledger: %s\n", r.ledgerSkipped)
	}
}

// writeDrains prints one row per drain, with its ratios to the references
// and to the first row.
func (r *report) writeDrains(w io.Writer) {
	if len(r.drains) == 0 {
		return
	}
	tw := newTable(w, "\nbacklog drains (executors started → every message acked, so every receipt stored):")
	fmt.Fprintln(tw, "  stored intents\texecutors\tapprovals\tenvelope\tdrain\tapprovals/s\t× naive\t× batched\t× ledger\t× Pebble\t× 1st row\tCPU/approval\treceipts/batch\tcheck")
	first := r.drains[0].rate()
	for _, d := range r.drains {
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%d B\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.preload, d.executors, d.n, d.envelope,
			d.took.Round(time.Millisecond), thousands(d.rate()), ratio(d.rate(), r.naive.rate()), ratio(d.rate(), r.batched.rate()), ratio(d.rate(), r.ledgerRef().rate()), ratio(d.rate(), r.pebble.rate()),
			ratio(d.rate(), first), cpuString(d), batchString(d), d.check.summary())
	}
	tw.Flush()
}

// writeLives prints one row per live run, then the stages of each.
func (r *report) writeLives(w io.Writer) {
	if len(r.lives) == 0 {
		return
	}
	tw := newTable(w, "\nlive (latency from each approval's scheduled publish to its receipt read from RECEIPTS):")
	fmt.Fprintln(tw, "  offered\tachieved\texecutors\tapprovals\tp50\tp95\tp99\tmax\tp99/p50\tcheck")
	for _, l := range r.lives {
		offered := thousands(l.offered) + "/s"
		if l.rate.HalfOfMax {
			offered += " (half of max)"
		}
		fmt.Fprintf(tw, "  %s\t%s/s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", offered, thousands(l.achieved), l.executors, l.n,
			ms(l.pct(0.50)), ms(l.pct(0.95)), ms(l.pct(0.99)), ms(l.pct(1)),
			ratio(float64(l.pct(0.99)), float64(l.pct(0.50))), l.check.summary())
	}
	tw.Flush()
	for _, l := range r.lives {
		if l.stagesN == 0 {
			continue
		}
		tw := newTable(w, "\n"+stagesHeader(l))
		fmt.Fprintln(tw, "  stage\tp50\tp99\tmean")
		for _, st := range l.stages {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", st.name, ms(st.pct(0.50)), ms(st.pct(0.99)), ms(st.mean))
		}
		tw.Flush()
	}
}

// writeMemory prints the service process's memory after each store's
// measurements.
func (r *report) writeMemory(w io.Writer) {
	if len(r.memory) > 0 {
		fmt.Fprintln(w)
	}
	for _, m := range r.memory {
		fmt.Fprintf(w, "task service process (store with %d intents preloaded, after %s): resident memory %s, peak %s\n", m.preload, m.after, mib(m.now), mib(m.peak))
	}
}

// writeFailures prints the problems of every check that failed.
func (r *report) writeFailures(w io.Writer) {
	for _, d := range r.drains {
		if d.check != nil && !d.check.ok() {
			fmt.Fprintf(w, "\nCHECK FAILED (%d stored intents, %d executors):\n  %s\n", d.preload, d.executors, strings.Join(d.check.problems, "\n  "))
		}
	}
	for _, l := range r.lives {
		if l.check != nil && !l.check.ok() {
			fmt.Fprintf(w, "\nCHECK FAILED (live at %s/s):\n  %s\n", thousands(l.offered), strings.Join(l.check.problems, "\n  "))
		}
	}
}

// writeStages prints the time of each stage of the run.
func (r *report) writeStages(w io.Writer) {
	if len(r.stages) == 0 {
		return
	}
	tw := newTable(w, "\ntime per stage:")
	for _, s := range r.stages {
		fmt.Fprintf(tw, "  %s\t%s\n", s.name, s.took.Round(time.Millisecond))
	}
	tw.Flush()
}

// summary is the check in one cell.
func (c *checkResult) summary() string {
	if c == nil {
		return "not checked"
	}
	verdict := "ok"
	if !c.ok() {
		verdict = "FAILED"
	}
	lost := ""
	if c.retried > 0 {
		lost = fmt.Sprintf("; %d calls retried, %d creates whose answer was lost (their intents replayed on the retry)", c.retried, c.answerLost)
	}
	if c.dav {
		return fmt.Sprintf("%s: %d/%d with receipt; CalDAV tasks +%d = distinct intents %d; %s%s",
			verdict, c.withReceipt, c.messages, c.delta.TasksExisting, c.distinct, outcomesString(c.outcomes), lost)
	}
	return fmt.Sprintf("%s: %d/%d with receipt; creates %d = distinct intents %d; requests %d; %s%s",
		verdict, c.withReceipt, c.messages, c.delta.CreatesExecuted, c.distinct, c.delta.RequestsReceived, outcomesString(c.outcomes), lost)
}

func outcomesString(m map[string]int) string {
	var parts []string
	for _, k := range []string{"created", "replayed", "idempotency_conflict", "rejected", "dead_lettered", "in_doubt"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// cpuString is the CPU time per approval, split between this process and
// the service process when it runs on its own.
func cpuString(d *drainResult) string {
	n := time.Duration(d.n)
	if n == 0 {
		return "-"
	}
	us := func(t time.Duration) string { return fmt.Sprintf("%.0f µs", float64(t/n)/float64(time.Microsecond)) }
	if d.serviceCPU > 0 {
		return us(d.cpu+d.serviceCPU) + " (service " + us(d.serviceCPU) + ")"
	}
	return us(d.cpu)
}

// batchString is the mean size of the receipt batches and the share of
// receipts that were stored in batches.
func batchString(d *drainResult) string {
	if d.batches == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f (%.0f%% batched)", float64(d.batched)/float64(d.batches), 100*float64(d.batched)/float64(max(d.n, 1)))
}

// newTable prints title on a line of its own and returns the writer that
// aligns the table below it; flush it when the rows are written.
func newTable(w io.Writer, title string) *tabwriter.Writer {
	fmt.Fprintln(w, title)
	return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
}
