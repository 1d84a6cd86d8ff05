package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/cmd/internal/verify"
	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/internal/tracing/otlp"
	"github.com/sendtwice/sendtwice/send"
)

var (
	chaosApprovals = flag.Int("chaos.approvals", 5000, "approvals the chaos test publishes")
	chaosExecutors = flag.Int("chaos.executors", 3, "executor processes in the chaos test")
	chaosDuration  = flag.Duration("chaos.duration", 30*time.Second, "how long the publishers spread the approvals over, under faults")
)

// roleEnv makes the test binary run one part of the system as its own OS
// process: "nats" (a NATS server with JetStream, fsync before ack) or
// "service" (the fake task service).
const roleEnv = "SENDTWICE_TEST_ROLE"

func runRole(role string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dir, url := os.Getenv("SENDTWICE_TEST_DIR"), os.Getenv("SENDTWICE_TEST_URL")
	switch role {
	case "nats":
		port, _ := strconv.Atoi(os.Getenv("SENDTWICE_TEST_PORT"))
		s, err := embedded.Start(embedded.Options{Dir: dir, Port: port})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		<-ctx.Done()
		s.Shutdown()
		s.WaitForShutdown()
		return 0
	case "service":
		// Its spans go where the environment says, as provider serve's do
		// (cli.Main): nowhere unless OTEL_EXPORTER_OTLP_ENDPOINT is set.
		stopTracing, err := otlp.Start(ctx, "sendtwice-provider")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = stopTracing(context.Background()) }()
		connect := func() (*nats.Conn, error) {
			return nats.Connect(url, nats.Name("fake-task-provider"), nats.MaxReconnects(-1),
				nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond))
		}
		h, err := provider.Host(dir, provider.Options{}, provider.ServiceConfig{AllowFaults: true}, connect)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		<-ctx.Done()
		_ = h.Stop()
		return 0
	}
	return 2
}

// supervised is a process the chaos test keeps running: when it ends it is
// started again, until the test stops it.
type supervised struct {
	name  string
	start func() *exec.Cmd
	log   *syncBuffer

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopped  bool
	paused   bool
	restarts atomic.Int64
	done     chan struct{}
}

func supervise(t *testing.T, name string, start func() *exec.Cmd) *supervised {
	s := &supervised{name: name, start: start, log: &syncBuffer{}, done: make(chan struct{})}
	s.launch(t)
	go func() {
		defer close(s.done)
		for {
			s.mu.Lock()
			cmd := s.cmd
			s.mu.Unlock()
			_ = cmd.Wait()
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			s.restarts.Add(1)
			s.launch(t)
		}
	}()
	t.Cleanup(func() { s.stop(syscall.SIGTERM) })
	return s
}

func (s *supervised) launch(t *testing.T) {
	cmd := s.start()
	cmd.Stdout, cmd.Stderr = s.log, s.log
	for i := 0; ; i++ {
		if err := cmd.Start(); err == nil {
			break
		} else if i == 20 {
			t.Errorf("starting %s: %v", s.name, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
		cmd = s.start()
		cmd.Stdout, cmd.Stderr = s.log, s.log
	}
	s.mu.Lock()
	s.cmd, s.paused = cmd, false
	s.mu.Unlock()
}

func (s *supervised) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
		switch sig {
		case syscall.SIGSTOP:
			s.paused = true
		case syscall.SIGCONT:
			s.paused = false
		}
	}
}

func (s *supervised) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// stop ends the process for good.
func (s *supervised) stop(sig syscall.Signal) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	cmd := s.cmd
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-s.done
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func roleCmd(role, dir, url string, port int) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"="+role, "SENDTWICE_TEST_DIR="+dir, "SENDTWICE_TEST_URL="+url,
		"SENDTWICE_TEST_PORT="+strconv.Itoa(port), "GORACE=atexit_sleep_ms=0")
	return cmd
}

// poisonIntent is the intent of the approval that kills every executor
// that takes it (a crash loop on all replicas): it must end in a dead letter
// that says its deliveries ran out.
const poisonIntent = "intent-chaos-poison"

// workload is what the publishers send: the approval that kills its
// executors first, then distinct approvals, resends of them, changed
// requests under the same intent ids, and poison messages.
type workload struct {
	envelopes [][]byte
	distinct  int
}

func buildWorkload(t *testing.T, n int) workload { return buildWorkloadFor(t, scenario.Fake, n) }

// buildWorkloadFor is buildWorkload with requests for f's provider and
// destination, approved for them.
func buildWorkloadFor(t *testing.T, f scenario.For, n int) workload {
	cand := scenario.Candidate()
	approveAs := func(requestID, intentID, title, approvalID string) (scenario.Approved, error) {
		return f.ApproveWith(cand, requestID, intentID, title, approve.Options{ID: approvalID})
	}
	distinct := n * 70 / 100
	resends := n * 20 / 100
	conflicts := n * 8 / 100
	poison := n - distinct - resends - conflicts
	w := workload{distinct: distinct}
	for i := 1; i <= distinct; i++ {
		a, err := f.Generate(cand, "chaos", i)
		if err != nil {
			t.Fatal(err)
		}
		w.envelopes = append(w.envelopes, a.Envelope())
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < resends; i++ {
		w.envelopes = append(w.envelopes, w.envelopes[r.IntN(distinct)])
	}
	for i := 1; i <= conflicts; i++ {
		k := r.IntN(distinct) + 1
		a, err := approveAs(fmt.Sprintf("task-request-chaos-changed-%06d", i),
			fmt.Sprintf("intent-chaos-%06d", k), fmt.Sprintf("%s (changed #%d)", scenario.Title, i),
			fmt.Sprintf("approval-chaos-changed-%06d", i))
		if err != nil {
			t.Fatal(err)
		}
		w.envelopes = append(w.envelopes, a.Envelope())
	}
	valid := string(w.envelopes[0])
	for i := 0; i < poison; i++ {
		var p []byte
		switch i % 4 {
		case 0: // random bytes
			p = make([]byte, 1+r.IntN(200))
			for j := range p {
				p[j] = byte(r.UintN(256))
			}
		case 1: // truncated JSON
			p = []byte(valid[:1+r.IntN(len(valid)-1)])
		case 2: // a payload over the gate's limit (the stream takes some more, for headers)
			p = []byte(strings.Replace(valid, `"kind":"commitment"`, `"kind":"`+strings.Repeat("x", document.MaxEnvelopeBytes+4<<10)+`"`, 1))
		case 3: // a valid envelope with an absurd intent id
			p = []byte(strings.Replace(valid, `"intent_id":"intent-chaos-000001"`, `"intent_id":"`+strings.Repeat("\u202e", 40)+strings.Repeat("../", 100)+`"`, 1))
		}
		w.envelopes = append(w.envelopes, p)
	}
	r.Shuffle(len(w.envelopes)-1, func(i, j int) {
		// Keep the first envelope first so that the poison copies of it are
		// meaningful; shuffle the rest.
		w.envelopes[i+1], w.envelopes[j+1] = w.envelopes[j+1], w.envelopes[i+1]
	})
	killer, err := approveAs("task-request-chaos-poison", poisonIntent, scenario.Title+" (kills its executors)", "approval-chaos-poison")
	if err != nil {
		t.Fatal(err)
	}
	w.envelopes = append([][]byte{killer.Envelope()}, w.envelopes...)
	return w
}

func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes a minute or more")
	}
	n := *chaosApprovals
	dir := t.TempDir()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	faults := map[string]int{}
	var fmu sync.Mutex
	count := func(name string) { fmu.Lock(); faults[name]++; fmu.Unlock() }

	natsProc := supervise(t, "nats", func() *exec.Cmd { return roleCmd("nats", filepath.Join(dir, "nats"), url, port) })
	nc, js := testenv.Connect(t, url, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond))
	topo := topology.Config{AckWait: 2 * time.Second, MaxDeliver: 20, NakDelay: 50 * time.Millisecond, MaxNakDelay: 500 * time.Millisecond}
	waitFor(t, 20*time.Second, "the topology", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := topology.Ensure(ctx, js, topo)
		return err == nil
	})
	service := supervise(t, "service", func() *exec.Cmd { return roleCmd("service", filepath.Join(dir, "service"), url, 0) })
	var executors []*supervised
	// Every executor process records its calls to the task service in a
	// file of its own, for the linearizability check at the end.
	callsDir := filepath.Join(dir, "calls")
	if err := os.MkdirAll(callsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= *chaosExecutors; i++ {
		id := fmt.Sprintf("exec-%d", i)
		var launches atomic.Int64
		executors = append(executors, supervise(t, id, func() *exec.Cmd {
			calls := filepath.Join(callsDir, fmt.Sprintf("%s-%03d.jsonl", id, launches.Add(1)))
			cmd := exec.Command(os.Args[0], "serve", "--server", url, "--insecure-allow-unsigned", "--id", id, "--ack-wait", "2s", "--max-deliver", "20",
				"--call-timeout", "1s", "--concurrency", "64", "--log-level", "warn", "--record-calls", calls,
				"--fault", "after-call:kill:0.0005", "--fault", "after-receipt:kill:0.0005",
				"--fault", "before-ack:kill:0.0005", "--fault", "before-ack:stall=3s:0.001",
				"--fault", "taken@"+poisonIntent+":kill")
			cmd.Env = append(os.Environ(), asMain+"=1", "GORACE=atexit_sleep_ms=0")
			return cmd
		}))
	}

	w := buildWorkload(t, n)
	t.Logf("workload: %d messages, %d distinct intents", len(w.envelopes), w.distinct)
	start := time.Now()

	// Chaos, until the publishers are done and a little after.
	var strayRefused string
	rnd := rand.New(rand.NewPCG(3, 4))
	svc := provider.NewClient(nc)
	var natsRestarts int
	stopChaos := everyTick(400*time.Millisecond, func(i int) {
		if i == 20 {
			// A second task service instance, with a store of its own,
			// tries to join mid-run; it must be refused, naming the
			// running one. (Done here, between faults, so that the
			// running instance is up and answering when it tries.)
			strayRefused = tryStrayService(t, svc, filepath.Join(dir, "service-stray"), url)
			count("second service instance refused")
			return
		}
		switch k := rnd.IntN(10); {
		case k < 3:
			executors[rnd.IntN(len(executors))].signal(syscall.SIGKILL)
			count("executor killed (SIGKILL)")
		case k == 3:
			e := executors[rnd.IntN(len(executors))]
			if !e.isPaused() {
				e.signal(syscall.SIGSTOP)
				count("executor stopped past AckWait (SIGSTOP, SIGCONT)")
				time.AfterFunc(topo.AckWait+time.Second, func() { e.signal(syscall.SIGCONT) })
			}
		case k == 4:
			sig := syscall.SIGTERM
			if rnd.IntN(2) == 0 {
				sig = syscall.SIGKILL
			}
			service.signal(sig)
			count("service restarted")
		case k == 5 && natsRestarts < 3 && i > 5:
			natsRestarts++
			natsProc.signal(syscall.SIGTERM)
			count("NATS server restarted")
			time.Sleep(time.Second)
		default:
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if _, err := svc.ArmFault(ctx, 1+rnd.IntN(3)); err == nil {
				count("service replies dropped (armed)")
			}
			cancel()
		}
	})

	// Publish from 4 senders; each message is retried with its own id
	// until the stream acknowledges it.
	var published sync.Map
	var wg sync.WaitGroup
	pubCtx, cancelPub := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancelPub()
	interval := *chaosDuration * 4 / time.Duration(len(w.envelopes)) // per sender
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			next := time.Now()
			for i := p; i < len(w.envelopes); i += 4 {
				time.Sleep(time.Until(next))
				next = next.Add(interval)
				id := send.NewMsgID()
				for pubCtx.Err() == nil {
					ctx, cancel := context.WithTimeout(pubCtx, 3*time.Second)
					sent, err := testenv.Publish(ctx, js, w.envelopes[i], send.MsgID(id))
					cancel()
					if err == nil {
						published.Store(sent.StreamSeq, sent.IntentID)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}(p)
	}
	wg.Wait()
	publishTook := time.Since(start)
	time.Sleep(2 * time.Second)
	stopChaos()

	// Heal: everything running and not paused, then drain.
	for _, e := range append([]*supervised{service, natsProc}, executors...) {
		e.signal(syscall.SIGCONT)
	}
	var seqs []uint64
	var poisonSeq uint64
	published.Range(func(k, v any) bool {
		seqs = append(seqs, k.(uint64))
		if v.(string) == poisonIntent {
			poisonSeq = k.(uint64)
		}
		return true
	})
	if len(seqs) != len(w.envelopes) {
		t.Fatalf("%d messages stored for %d sends", len(seqs), len(w.envelopes))
	}
	var in *audit.Input
	waitFor(t, 4*time.Minute, "every message to be finished", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		in, err = audit.Load(ctx, nc)
		if err != nil {
			return false
		}
		// Every message ends with a receipt, a dead letter with a
		// dead_lettered one; a dead letter read before its receipt is
		// stored is not the end yet (Load reads the receipts first).
		for _, s := range seqs {
			if len(in.Receipts[s]) == 0 {
				return false
			}
		}
		return in.Consumer.Pending == 0 && in.Consumer.AckPending == 0
	})
	took := time.Since(start)

	rep := audit.Verify(in)
	outcomes := map[string]int{}
	var receipts int
	for _, rs := range in.Receipts {
		for _, r := range rs {
			outcomes[r.Outcome]++
			receipts++
		}
	}
	for _, e := range executors {
		out := e.log.String()
		for _, p := range []string{"taken", "after-call", "after-receipt", "before-ack"} {
			faults["executor fault point "+p+" (kill or stall)"] += countFault(out, p)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: %d approvals published in %s, all finished in %s\n", len(seqs), publishTook.Round(time.Millisecond), took.Round(time.Millisecond))
	var onRedelivery int
	for _, r := range in.Requests {
		if _, d, ok := callRefDelivery(r.CallRef); ok && d > 1 {
			onRedelivery++
		}
	}
	fmt.Fprintf(&b, "  deliveries %d (consumer count; beyond one per message: %d), service calls made on a redelivery %d\n",
		in.Consumer.Delivered, int64(in.Consumer.Delivered)-int64(len(seqs)), onRedelivery)
	fmt.Fprintf(&b, "  receipts %d by outcome %v\n", receipts, outcomes)
	fmt.Fprintf(&b, "  dead letters %d\n", len(in.DeadLetters))
	fmt.Fprintf(&b, "  service: requests received %d, creates executed %d, tasks existing %d (distinct intents %d)\n",
		in.Counts.RequestsReceived, in.Counts.CreatesExecuted, in.Counts.TasksExisting, w.distinct)
	for k, v := range faults {
		fmt.Fprintf(&b, "  fault: %-52s %d\n", k, v)
	}
	fmt.Fprintf(&b, "  process restarts: nats %d, service %d", natsProc.restarts.Load(), service.restarts.Load())
	for _, e := range executors {
		fmt.Fprintf(&b, ", %s %d", e.name, e.restarts.Load())
	}
	t.Log(b.String())
	var vb strings.Builder
	verify.PrintReport(&vb, rep)
	t.Log("\n" + vb.String())
	checkLinearizable(t, callsDir)
	if !rep.OK {
		t.Fatal("verify found violations after the chaos run")
	}
	// The approval that killed every executor taking it ends in a dead
	// letter that says why, and a dead_lettered receipt; it never reached
	// the service.
	if reason, ok := in.DeadLetters[poisonSeq]; !ok || !strings.Contains(reason, "deliveries ran out") {
		t.Fatalf("the approval that kills its executors (message %d): dead letter %q (present %v), want one saying its deliveries ran out",
			poisonSeq, reason, ok)
	}
	var poisonOutcomes []string
	for _, r := range in.Receipts[poisonSeq] {
		poisonOutcomes = append(poisonOutcomes, r.Outcome)
	}
	if len(poisonOutcomes) != 1 || poisonOutcomes[0] != document.OutcomeDeadLettered {
		t.Fatalf("the approval that kills its executors has receipts %v, want one dead_lettered", poisonOutcomes)
	}
	t.Logf("the approval that kills its executors: message %d, dead-lettered: %s", poisonSeq, in.DeadLetters[poisonSeq])
	if strayRefused == "" {
		t.Fatal("the chaos run ended before a second service instance tried to start")
	}
	t.Logf("the second service instance was refused: %s", strayRefused)
	if i := slices.IndexFunc(rep.Checks, func(c audit.Check) bool { return c.N == 11 }); i < 0 || !rep.Checks[i].OK {
		t.Fatalf("check 11 (one store answers) is missing or failed: %+v", rep.Checks)
	}
	// Any other dead letter is a message that died beside the poison (an
	// executor killed with several deliveries in flight, 20 times over):
	// its outcome is unknown, and the operator's answer is to redrive it.
	// Each must come back with the service's answer, through the real
	// command.
	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	dls, err := redrive.List(lctx, js)
	lcancel()
	if err != nil {
		t.Fatalf("listing the dead letters: %v", err)
	}
	for _, dl := range dls {
		if dl.ApprovalSeq == poisonSeq {
			continue
		}
		t.Logf("dead letter %d of message %d: %s", dl.Seq, dl.ApprovalSeq, dl.Reason)
		got, errOut, err := runCLI(context.Background(), "redrive", "--server", url, "--seq", strconv.FormatUint(dl.Seq, 10), "--wait", "60s")
		// The service answers: created, replayed, or (for the workload's
		// changed requests) idempotency_conflict, which redrive reports
		// as not created or replayed and exits non-zero for.
		conflict := strings.Contains(got, "): idempotency_conflict")
		if err != nil && !(errors.Is(err, errSilent) && conflict) {
			t.Fatalf("redrive of dead letter %d: %v\n%s%s", dl.Seq, err, got, errOut)
		}
		if !strings.Contains(got, "): created") && !strings.Contains(got, "): replayed") && !conflict {
			t.Fatalf("redrive of dead letter %d: %q, want the service's answer", dl.Seq, got)
		}
	}
	ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
	counts, err := provider.NewClient(nc).Info(ictx)
	icancel()
	if err != nil {
		t.Fatalf("reading the service's counters after the redrives: %v", err)
	}
	if counts.Counts.TasksExisting != int64(w.distinct) || counts.Counts.CreatesExecuted != int64(w.distinct) {
		t.Fatalf("%+v for %d distinct intents", counts.Counts, w.distinct)
	}
	if os.Getenv("SENDTWICE_CHAOS_REPORT") != "" {
		j, _ := json.MarshalIndent(map[string]any{"faults": faults, "outcomes": outcomes, "counts": in.Counts,
			"deliveries": in.Consumer.Delivered, "calls_on_redelivery": onRedelivery, "published": len(seqs)}, "", "  ")
		_ = os.WriteFile(os.Getenv("SENDTWICE_CHAOS_REPORT"), j, 0o644)
	}
	// The command line gives the same verdict.
	if out, _, err := runCLI(context.Background(), "verify", "--server", url); err != nil {
		t.Fatalf("executor verify: %v\n%s", err, out)
	}
}

// tryStrayService starts a second task service instance on its own store
// while the first one answers, and returns the refusal it printed. It fails
// the test if the second instance is not refused within 30 s.
func tryStrayService(t *testing.T, svc *provider.Client, dir, url string) string {
	t.Helper()
	// Called from the chaos goroutine: no t.Fatal here.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := svc.Info(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the task service did not answer before a second instance tried: %v", err)
			return ""
		}
	}
	cmd := roleCmd("service", dir, url, 0)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Errorf("starting a second service instance: %v", err)
		return ""
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		// Refused by the running instance's answer or lease, or, if it
		// was between restarts, by the deployment's adopted store.
		if err == nil || !strings.Contains(out.String(), provider.ErrAnotherInstance.Error()) &&
			!strings.Contains(out.String(), provider.ErrNotAdopted.Error()) {
			t.Errorf("a second service instance on another store ended with %v; want a refusal naming the running one:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("a second service instance on another store was not refused within 30 s:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// callRefDelivery reads the delivery count out of an executor's call reference.
func callRefDelivery(ref string) (seq, delivered uint64, ok bool) {
	parts := strings.Split(ref, ":")
	if len(parts) != 4 {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(parts[1], 10, 64)
	d, err2 := strconv.ParseUint(parts[2], 10, 64)
	return s, d, err1 == nil && err2 == nil
}

func countFault(out, point string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "FAULT INJECTED") && strings.Contains(line, "point="+point) {
			n++
		}
	}
	return n
}

// everyTick calls fault with the tick's number (0, 1, …) every interval,
// from one goroutine, until the stop it returns is called; stop returns
// once the call under way, if any, has ended.
func everyTick(interval time.Duration, fault func(i int)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			fault(i)
		}
	}()
	return func() { cancel(); <-done }
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
