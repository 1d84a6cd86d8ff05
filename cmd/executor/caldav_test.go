package main

// The pipeline against real CalDAV servers: executor processes started with
// --task-service caldav, the JetStream pipeline of testenv, and Radicale or
// Xandikos started fresh for each test by davtest. What the tests assert
// about the server is read from the server itself: PUTs and 201 answers from
// its own request log, VTODOs from a REPORT on the collection and from the
// .ics files in its storage folder. The server keeps no counters, so the
// receipts' counts are null.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// davRig is the pipeline with a CalDAV server as its task service.
type davRig struct {
	env *testenv.Env
	srv *davtest.Server
	// dav reads the collection directly (not through a proxy), as an audit
	// would.
	dav *caldav.Adapter
}

// startDAVRig starts the JetStream pipeline and a fresh server of kind k.
func startDAVRig(t *testing.T, k davtest.Kind) *davRig {
	t.Helper()
	return newDAVRig(t, davtest.Start(t, k, davtest.Options{}))
}

// newDAVRig starts the JetStream pipeline for the collection of srv and
// makes the deployment's mark key in its intent ledger's bucket, as the
// first executor to serve would, so that the rig's adapter names, and
// proves, tasks as the executors do.
func newDAVRig(t *testing.T, srv *davtest.Server) *davRig {
	t.Helper()
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ledger.Ensure(ctx, env.JS, 1); err != nil {
		t.Fatal(err)
	}
	key, err := ledger.MarkKey(ctx, env.JS, true)
	if err != nil {
		t.Fatal(err)
	}
	dav, err := caldav.New(caldav.Config{CollectionURL: srv.CollectionURL, Timeout: 10 * time.Second, MarkKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return &davRig{env: env, srv: srv, dav: dav}
}

// startServedDAVRig is startDAVRig with one executor process, exec-1,
// serving the server's collection.
func startServedDAVRig(t *testing.T, k davtest.Kind) *davRig {
	t.Helper()
	r := startDAVRig(t, k)
	r.executor(t, r.srv.CollectionURL, "exec-1")
	return r
}

// executor starts an executor process whose task service is the CalDAV
// collection at collectionURL (the server's, or a proxy's in front of it).
func (r *davRig) executor(t *testing.T, collectionURL, id string, extra ...string) *process {
	t.Helper()
	args := append([]string{"--task-service", "caldav", "--caldav-url", collectionURL}, extra...)
	return startExecutor(t, r.env.URL(), id, args...)
}

// name is the name of the resource of intent in the default scope, tagged
// under the deployment's mark key as the executors name it.
func (r *davRig) name(t *testing.T, intent string) string {
	t.Helper()
	name, err := r.dav.ResourceNameOf(document.DefaultScope, intent)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// resource is the path of intent's resource on the server.
func (r *davRig) resource(t *testing.T, intent string) string {
	t.Helper()
	return r.srv.ResourcePath(r.name(t, intent))
}

// taskID is the task id the executors give intent's task in the default
// scope.
func (r *davRig) taskID(intent string) string {
	return r.dav.TaskIDOf(document.DefaultScope, intent)
}

// listing reads the collection with the adapter's REPORT.
func (r *davRig) listing(t *testing.T) caldav.Listing {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := r.dav.Tasks(ctx)
	if err != nil {
		t.Fatalf("listing the collection: %v", err)
	}
	return l
}

// tasksFor counts the listed VTODOs that carry intent's property.
func tasksFor(l caldav.Listing, intent string) int {
	n := 0
	for _, task := range l.Tasks {
		if task.IntentID == intent {
			n++
		}
	}
	return n
}

// sendByProcess publishes envelope from a publisher process of its own
// (this test binary run as the demo's publisher processes are, publisher
// send) and returns the receipt it waited for.
func sendByProcess(t *testing.T, natsURL string, envelope []byte) *document.Receipt {
	t.Helper()
	file := writeTestFile(t, "envelope.json", string(envelope))
	cmd := exec.Command(os.Args[0], "--server", natsURL, "--envelope", file, "--wait", "30s", "--json")
	cmd.Env = append(senderEnv(os.Environ()), asMain+"=1", demoSenderEnv+"=1")
	rc, err := runSender(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// spreadPublish publishes envelopes one after another in the background,
// gap apart; done receives the first error, or nil once all are stored.
type spreadPublish struct {
	mu   sync.Mutex
	seqs []uint64
	done chan error
}

func publishSpread(ctx context.Context, js jetstream.JetStream, envelopes [][]byte, gap time.Duration) *spreadPublish {
	p := &spreadPublish{seqs: make([]uint64, 0, len(envelopes)), done: make(chan error, 1)}
	go func() {
		for _, e := range envelopes {
			sent, err := testenv.Publish(ctx, js, e)
			if err != nil {
				p.done <- err
				return
			}
			p.mu.Lock()
			p.seqs = append(p.seqs, sent.StreamSeq)
			p.mu.Unlock()
			time.Sleep(gap)
		}
		p.done <- nil
	}()
	return p
}

// sent returns the stream sequences of the envelopes stored so far.
func (p *spreadPublish) sent() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seqs)
}

// startDAVRigAndCreate starts a rig on k with one executor, exec-1, and
// sends envelope, an approval for intent-0001, checking that its receipt
// says the task was created in the collection's store (what names the send
// in a failure): the rig and that store's id.
func startDAVRigAndCreate(t *testing.T, k davtest.Kind, envelope []byte, what string) (*davRig, string) {
	t.Helper()
	r := startServedDAVRig(t, k)
	store := r.dav.StoreID()
	created := r.send(t, envelope)
	checkServiceReceipt(t, what, created.Receipt, document.OutcomeCreated, r.taskID("intent-0001"), store)
	return r, store
}

// send publishes envelope in this process and waits for its first terminal
// receipt.
func (r *davRig) send(t *testing.T, envelope []byte) *testenv.Receipt {
	t.Helper()
	return sendAndWait(t, r.env, envelope)
}

// sendAndWait publishes envelope in this process to env's pipeline and
// waits for its first terminal receipt.
func sendAndWait(t *testing.T, env *testenv.Env, envelope []byte) *testenv.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sent, err := testenv.Publish(ctx, env.JS, envelope)
	if err != nil {
		t.Fatal(err)
	}
	return receiptFor(t, env.JS, sent.IntentID, sent.StreamSeq)
}

// awaitReceipts waits until every message in seqs has a terminal receipt or
// a dead letter in env's pipeline, and returns the receipts by message.
func awaitReceipts(t *testing.T, env *testenv.Env, seqs []uint64, within time.Duration) map[uint64][]*document.Receipt {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		// Each look has a bound of its own, so that the deadline passing
		// mid-read fails with the count below, not with the read's error.
		byseq, dead, err := readOutcomes(env)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, seq := range seqs {
			terminal := false
			for _, rc := range byseq[seq] {
				terminal = terminal || document.Terminal(rc.Outcome)
			}
			if _, isDead := dead[seq]; terminal || isDead {
				done++
			}
		}
		if done == len(seqs) {
			return byseq
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages have a terminal receipt or a dead letter after %s", done, len(seqs), within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readOutcomes reads the receipts by stream sequence and the sequences
// dead-lettered, within 30 s.
func readOutcomes(env *testenv.Env) (map[uint64][]*document.Receipt, map[uint64]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	byseq, err := audit.ReceiptsBySeq(ctx, env.JS)
	if err != nil {
		return nil, nil, err
	}
	dead, err := audit.DeadLetterSeqs(ctx, env.JS)
	return byseq, dead, err
}

// awaitPullers waits until n executors wait on the shared consumer, so
// that the messages published next are shared among them.
func (r *davRig) awaitPullers(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	awaitPullers(ctx, t, r.env, n)
}

// awaitPullers waits until n executors wait on env's shared consumer.
func awaitPullers(ctx context.Context, t *testing.T, env *testenv.Env, n int) {
	t.Helper()
	for {
		st, err := audit.Consumer(ctx, env.JS)
		if err == nil && st.Waiting >= n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d executors wait on the consumer (%v), want %d", st.Waiting, err, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkServiceReceipt fails unless rc is a receipt of a real task service
// (CalDAV, Redmine): outcome want, task id task (when given), store id
// store, null counts.
func checkServiceReceipt(t *testing.T, what string, rc *document.Receipt, want, task, store string) {
	t.Helper()
	if rc.Outcome != want {
		t.Errorf("%s: outcome %s, want %s (rejection %+v, failure %+v)", what, rc.Outcome, want, rc.Rejection, rc.Failure)
		return
	}
	if rc.TaskID == nil || task != "" && *rc.TaskID != task {
		t.Errorf("%s: task id %v, want %s", what, ptr(rc.TaskID), task)
	}
	if rc.StoreID == nil || *rc.StoreID != store {
		t.Errorf("%s: store id %v, want the service's %s", what, ptr(rc.StoreID), store)
	}
	if rc.Counts != nil {
		t.Errorf("%s: counts %+v, want null: the service keeps no counters", what, *rc.Counts)
	}
}

// callsReceived counts the calls for the resource at path that reached the
// server, from its log: requests received. A call is a PUT (answered 201,
// or 412 and then read back with one GET), or, for a key the intent ledger
// knows, one GET that looks the task up and creates nothing; so PUTs plus
// GETs less the 412 answers.
func callsReceived(srv *davtest.Server, path string) int {
	return srv.PUTs(path) + srv.Received(http.MethodGet, path) - srv.Answered(http.MethodPut, path, http.StatusPreconditionFailed)
}

func ptr(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

func TestCalDAVTheSeedsLineCountsTwoOneOneOnTheServer(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	for _, k := range davtest.Kinds() {
		t.Run("two publisher processes send one approval to "+string(k)+": created, replayed, 2 calls received, one 201, one VTODO", func(t *testing.T) {
			r := startServedDAVRig(t, k)
			intent := "intent-0001"
			first := sendByProcess(t, r.env.URL(), s.Original.Envelope())
			second := sendByProcess(t, r.env.URL(), s.Original.Envelope())
			checkServiceReceipt(t, "first receipt", first, document.OutcomeCreated, r.taskID(intent), r.dav.StoreID())
			checkServiceReceipt(t, "second receipt", second, document.OutcomeReplayed, ptr(first.TaskID), r.dav.StoreID())

			path := r.resource(t, intent)
			calls, creates := callsReceived(r.srv, path), r.srv.Creates(path)
			l := r.listing(t)
			stored := r.srv.StoredNames()
			t.Logf("%s: %d calls for %s received (%d PUTs), %d answered 201, %d VTODOs listed (%d ours), %d .ics files stored %q",
				k, calls, path, r.srv.PUTs(path), creates, l.VTODOs, len(l.Tasks), len(stored), stored)
			if calls != 2 || creates != 1 || l.VTODOs != 1 || tasksFor(l, intent) != 1 || len(stored) != 1 {
				t.Fatalf("requests received %d, creates executed %d, tasks existing %d by the REPORT (%d ours for %s) and %d by storage; want 2, 1, 1",
					calls, creates, l.VTODOs, tasksFor(l, intent), intent, len(stored))
			}
		})
	}
}

func TestCalDAVAChangedRequestConflictsAndTwoIntentsMakeTwoTasks(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k)+" a changed request under one intent conflicts and leaves the first VTODO byte for byte; another intent with the same content is a second VTODO", func(t *testing.T) {
			r, store := startDAVRigAndCreate(t, k, s.Original.Envelope(), "the original")
			name := r.name(t, "intent-0001")
			before := r.srv.Stored(name)
			if before == nil {
				t.Fatalf("no %s in the server's storage after the create", name)
			}

			changed := r.send(t, s.Changed.Envelope())
			checkServiceReceipt(t, "the changed request", changed.Receipt, document.OutcomeConflict, r.taskID("intent-0001"), store)
			if after := r.srv.Stored(name); !bytes.Equal(after, before) {
				t.Fatalf("the conflict changed the stored VTODO:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			path := r.resource(t, "intent-0001")
			if calls, creates := callsReceived(r.srv, path), r.srv.Creates(path); calls != 2 || creates != 1 {
				t.Fatalf("%s: %d calls received, %d answered 201; want 2 and 1", path, calls, creates)
			}

			other := r.send(t, s.NewIntent.Envelope())
			checkServiceReceipt(t, "the second intent", other.Receipt, document.OutcomeCreated, r.taskID("intent-0002"), store)
			l := r.listing(t)
			stored := r.srv.StoredNames()
			t.Logf("%s: conflict %q; VTODOs listed %d (intent-0001: %d, intent-0002: %d); stored %q",
				k, ptr(changed.TaskID), l.VTODOs, tasksFor(l, "intent-0001"), tasksFor(l, "intent-0002"), stored)
			if l.VTODOs != 2 || tasksFor(l, "intent-0001") != 1 || tasksFor(l, "intent-0002") != 1 || len(stored) != 2 {
				t.Fatalf("VTODOs listed %d (per intent %d and %d), stored %q; want one per intent, two in all",
					l.VTODOs, tasksFor(l, "intent-0001"), tasksFor(l, "intent-0002"), stored)
			}
			if p := r.resource(t, "intent-0002"); r.srv.Creates(p) != 1 {
				t.Fatalf("%s answered 201 %d times, want once", p, r.srv.Creates(p))
			}
		})
	}
}

func TestCalDAVSixtyFourDeliveriesOfOneIntentAcrossThreeExecutorsCreateOnce(t *testing.T) {
	const copies = 64
	s := testenv.SeedFor(t, scenario.CalDAV)
	for _, k := range davtest.Kinds() {
		t.Run(fmt.Sprintf("on %s %d concurrent deliveries of one approval across three executor processes get one 201", k, copies), func(t *testing.T) {
			r := startDAVRig(t, k)
			// Radicale takes the connections beyond its listen backlog of 5
			// only when the client sends its SYN again (after 1 s, then 2 s
			// more), so the calls get time enough for that. Each instance
			// takes at most 22 deliveries at once, so that all three share
			// the 64.
			for i := 1; i <= 3; i++ {
				r.executor(t, r.srv.CollectionURL, fmt.Sprintf("exec-%d", i), "--call-timeout", "15s", "--ack-wait", "30s", "--concurrency", "22")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r.awaitPullers(ctx, t, 3)
			seqs := publishCopies(ctx, t, r.env.JS, s.Original.Envelope(), copies)
			byseq := awaitReceipts(t, r.env, seqs, 60*time.Second)
			outcomes := map[string]int{}
			executors := map[string]int{}
			for _, seq := range seqs {
				rc := byseq[seq][0]
				outcomes[rc.Outcome]++
				executors[rc.Delivery.Executor]++
				if rc.Outcome == document.OutcomeCreated || rc.Outcome == document.OutcomeReplayed {
					checkServiceReceipt(t, fmt.Sprintf("message %d", seq), rc, rc.Outcome, r.taskID("intent-0001"), r.dav.StoreID())
				}
			}
			path := r.resource(t, "intent-0001")
			// Every delivery reaches the server: a PUT, or, once the
			// intent ledger knows the key, a lookup.
			calls, creates := callsReceived(r.srv, path), r.srv.Creates(path)
			l := r.listing(t)
			t.Logf("%s: receipts %v by executor %v; %d calls received (%d PUTs), %d answered 201, %d VTODOs listed, stored %q",
				k, outcomes, executors, calls, r.srv.PUTs(path), creates, l.VTODOs, r.srv.StoredNames())
			if creates != 1 {
				t.Fatalf("%d answers 201 in the server's log, want exactly one", creates)
			}
			if outcomes[document.OutcomeCreated] != 1 || outcomes[document.OutcomeReplayed] != copies-1 {
				t.Fatalf("receipts %v, want 1 created and %d replayed", outcomes, copies-1)
			}
			if calls < copies || l.VTODOs != 1 || len(r.srv.StoredNames()) != 1 {
				t.Fatalf("%d calls received (want at least %d), %d VTODOs listed, stored %q; want one VTODO", calls, copies, l.VTODOs, r.srv.StoredNames())
			}
			if len(executors) < 2 {
				t.Errorf("only %v handled the deliveries; the consumer was not shared", executors)
			}
		})
	}
}

func TestCalDAVALostReplyIsReplayedOnTheRedelivery(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k)+" the reply to the PUT is lost, the redelivery is replayed and the server holds one VTODO", func(t *testing.T) {
			r := startDAVRig(t, k)
			proxy := davtest.NewProxy(t, r.srv.BaseURL)
			viaProxy := proxy.Rewrite(r.srv.CollectionURL)
			through, err := caldav.New(caldav.Config{CollectionURL: viaProxy})
			if err != nil {
				t.Fatal(err)
			}
			r.executor(t, viaProxy, "exec-1")
			// Once it waits on the consumer it has read the collection
			// (serve does so before it consumes): the next answer lost is
			// the PUT's.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r.awaitPullers(ctx, t, 1)
			proxy.DropResponses(1)
			rc := r.send(t, s.Original.Envelope())
			checkServiceReceipt(t, "the receipt", rc.Receipt, document.OutcomeReplayed, r.taskID("intent-0001"), through.StoreID())
			if rc.Delivery.Delivered < 2 {
				t.Errorf("the replay came on delivery %d, want a redelivery", rc.Delivery.Delivered)
			}
			path := r.resource(t, "intent-0001")
			puts, creates := r.srv.PUTs(path), r.srv.Creates(path)
			l := r.listing(t)
			t.Logf("%s: %d answers dropped by the proxy; receipt %s on delivery %d; %d PUTs, %d answered 201, %d VTODOs listed, stored %q",
				k, proxy.Dropped(), rc.Outcome, rc.Delivery.Delivered, puts, creates, l.VTODOs, r.srv.StoredNames())
			if proxy.Dropped() != 1 {
				t.Fatalf("the proxy dropped %d answers, want 1", proxy.Dropped())
			}
			if creates != 1 || puts != 2 || l.VTODOs != 1 || len(r.srv.StoredNames()) != 1 {
				t.Fatalf("%d PUTs, %d answered 201, %d VTODOs listed, stored %q; want 2, 1, 1", puts, creates, l.VTODOs, r.srv.StoredNames())
			}
		})
	}
}

func TestCalDAVAServerRestartedMidRunLosesNothingAndDoublesNothing(t *testing.T) {
	const batch = 30
	envelopes, intents := generateBatch(t, scenario.CalDAV, "restart", batch)
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k)+" restarted while the executors work, every message ends with a receipt and every intent with one VTODO", func(t *testing.T) {
			r := startDAVRig(t, k)
			// The budget outlasts a restart: redeliveries come after 1 s,
			// 2 s, 4 s, ….
			r.executor(t, r.srv.CollectionURL, "exec-1", "--max-deliver", "6")
			r.executor(t, r.srv.CollectionURL, "exec-2", "--max-deliver", "6")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The batch is spread over about a second and a half; the
			// server restarts once a few receipts are in.
			run := publishThroughARestart(ctx, t, r.env, envelopes, "the server", r.srv.Restart, 60*time.Second)
			outcomes, dead := run.outcomes, run.dead
			l := r.listing(t)
			var puts, doubled int
			for _, intent := range intents {
				path := r.resource(t, intent)
				puts += r.srv.PUTs(path)
				if c := r.srv.Creates(path); c != 1 {
					doubled++
					t.Errorf("%s answered 201 %d times, want once", path, c)
				}
				if n := tasksFor(l, intent); n != 1 {
					t.Errorf("intent %s has %d VTODOs listed, want 1", intent, n)
				}
			}
			t.Logf("%s: restarted after %d receipts; receipts %v (%d on a redelivery), %d dead letters; %d PUTs for %d intents; %d VTODOs listed, %d stored",
				k, run.restartedAfter, outcomes, run.redelivered, len(dead), puts, batch, l.VTODOs, len(r.srv.StoredNames()))
			if len(dead) != 0 {
				t.Errorf("%d messages were dead-lettered: %v", len(dead), dead)
			}
			if outcomes[document.OutcomeCreated]+outcomes[document.OutcomeReplayed] != batch {
				t.Errorf("receipts %v, want %d created or replayed", outcomes, batch)
			}
			if l.VTODOs != batch || len(r.srv.StoredNames()) != batch {
				t.Errorf("%d VTODOs listed and %d stored, want %d", l.VTODOs, len(r.srv.StoredNames()), batch)
			}
		})
	}
}

func TestCalDAVATaskDeletedByAUserIsReplayedAsDeletedAndNotCreatedAgain(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k)+" a resend after a calendar app deleted the task is replayed from the intent ledger and creates nothing", func(t *testing.T) {
			r, store := startDAVRigAndCreate(t, k, s.Original.Envelope(), "the first send")
			path := r.resource(t, "intent-0001")
			// A calendar app deletes the task: a plain DELETE of its resource.
			if code := r.srv.Do(http.MethodDelete, path, nil); code/100 != 2 {
				t.Fatalf("DELETE %s answered %d", path, code)
			}
			if l := r.listing(t); l.VTODOs != 0 {
				t.Fatalf("after the DELETE the collection lists %d VTODOs", l.VTODOs)
			}
			// Verify notes the task as deleted since, and holds.
			report, err := verifyCalDAV(t, r, r.srv.CollectionURL)
			if err != nil || !strings.Contains(report, "which CalDAV collection "+r.srv.CollectionURL+" no longer holds") {
				t.Errorf("verify after the user's DELETE: %v\n%s", err, report)
			}
			again := r.send(t, s.Original.Envelope())
			puts, creates, calls := r.srv.PUTs(path), r.srv.Creates(path), callsReceived(r.srv, path)
			l := r.listing(t)
			t.Logf("%s: after the user's DELETE the resend came back %s %s; %d calls received, %d PUTs, %d answered 201, %d VTODOs listed",
				k, again.Outcome, ptr(again.TaskID), calls, puts, creates, l.VTODOs)
			// Replayed with the first task's id, from the collection's
			// store (the lookup names it though it found nothing).
			checkServiceReceipt(t, "the resend", again.Receipt, document.OutcomeReplayed, r.taskID("intent-0001"), store)
			if calls != 2 || puts != 1 || creates != 1 || l.VTODOs != 0 {
				t.Fatalf("%d calls received, %d PUTs, %d answered 201, %d VTODOs listed; want 2 calls, 1 PUT, 1 create (none after the deletion), no VTODO", calls, puts, creates, l.VTODOs)
			}
			report, err = verifyCalDAV(t, r, r.srv.CollectionURL)
			if err != nil {
				t.Errorf("verify after the resend: %v\n%s", err, violationLines(report))
			}
		})
	}
}

// publishCopies publishes n copies of envelope at once, as n senders would,
// and returns their stream sequences.
func publishCopies(ctx context.Context, t *testing.T, js jetstream.JetStream, envelope []byte, n int) []uint64 {
	t.Helper()
	seqs := make([]uint64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent, err := testenv.Publish(ctx, js, envelope)
			if err != nil {
				errs <- err
				return
			}
			seqs[i] = sent.StreamSeq
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("publishing: %v", err)
	}
	return seqs
}
