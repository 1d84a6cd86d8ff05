package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/verify"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/proctest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

var (
	clusterApprovals = flag.Int("cluster.approvals", 600, "approvals the cluster test publishes, a quarter of them resends")
	clusterDuration  = flag.Duration("cluster.duration", 30*time.Second, "how long the cluster test spreads its approvals over")
	clusterDown      = flag.Duration("cluster.down", 15*time.Second, "how long the killed node stays down (longer than a leader election, 4 to 9 s)")
	clusterSenders   = flag.Int("cluster.senders", 4, "concurrent publishers in the cluster test")
	clusterKill      = flag.Bool("cluster.kill", true, "SIGKILL and restart a node mid-run; false gives a steady run, for throughput figures")
)

// natsServerModule is the module the nats-server binary is built from, at
// the version go.mod pins.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// natsServerBinary builds the nats-server command of the pinned module
// once, and keeps it under the temporary directory keyed by the version.
func natsServerBinary(t *testing.T) string {
	t.Helper()
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == natsServerModule {
				version = d.Version
				if d.Replace != nil {
					version = d.Replace.Version
				}
			}
		}
	}
	if version == "" || version == "(devel)" {
		t.Fatalf("the test binary does not name the version of %s", natsServerModule)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sendtwice-nats-server-%s-%s-%s", version, runtime.GOOS, runtime.GOARCH))
	bin := filepath.Join(dir, "nats-server")
	if out, err := exec.Command(bin, "--version").Output(); err == nil && strings.Contains(string(out), version) {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("finding the go command: %v", err)
	}
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-o", tmp, natsServerModule)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building nats-server %s: %v\n%s", version, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built nats-server %s in %s", version, time.Since(start).Round(time.Millisecond))
	return bin
}

// natsNode is one nats-server process of the test cluster.
type natsNode struct {
	name                   string
	dir                    string // its configuration and its store
	client, route, monitor int
	bin                    string
	log                    *syncBuffer
	mu                     sync.Mutex
	cmd                    *exec.Cmd
	exited                 chan struct{}
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.client) }

func (n *natsNode) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(n.bin, "-c", filepath.Join(n.dir, n.name+".conf"))
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", n.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
}

// stop ends the process with sig and waits for it.
func (n *natsNode) stop(sig syscall.Signal) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// healthy is the node's own verdict: /healthz is 200 once the server is
// up, JetStream is enabled and its streams and consumers are current.
func (n *natsNode) healthy() bool {
	code, _, err := proctest.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.monitor))
	return err == nil && code == http.StatusOK
}

// clusterConfig writes deploy/nats's configuration for the nodes, with
// only the listen addresses, the routes and the store directory adapted to
// this machine's loopback and the test's directory. Anything else in the
// files is used as it is; a file whose shape no longer matches fails the
// test rather than being half adapted.
func clusterConfig(t *testing.T, nodes []*natsNode) {
	t.Helper()
	const deployDir = "../../deploy/nats"
	shared, err := os.ReadFile(filepath.Join(deployDir, "cluster.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(shared), "sync_interval: always") {
		t.Fatal("deploy/nats/cluster.conf lacks sync_interval: always")
	}
	for _, n := range nodes {
		own, err := os.ReadFile(filepath.Join(deployDir, n.name+".conf"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(own), "server_name: "+n.name+"\n") || !strings.Contains(string(own), "include ./cluster.conf") {
			t.Fatalf("deploy/nats/%s.conf does not name the server %s and include cluster.conf", n.name, n.name)
		}
		conf := string(shared)
		replace := func(old, new string) {
			if c := strings.Count(conf, old); c != 1 {
				t.Fatalf("deploy/nats/cluster.conf holds %q %d times, want once", old, c)
			}
			conf = strings.Replace(conf, old, new, 1)
		}
		replace("listen: 0.0.0.0:4222", fmt.Sprintf("listen: 127.0.0.1:%d", n.client))
		replace("http: 0.0.0.0:8222", fmt.Sprintf("http: 127.0.0.1:%d", n.monitor))
		replace("listen: 0.0.0.0:6222", fmt.Sprintf("listen: 127.0.0.1:%d", n.route))
		replace("store_dir: /data/jetstream", fmt.Sprintf("store_dir: %q", filepath.Join(n.dir, "jetstream")))
		for _, peer := range nodes {
			replace("nats-route://"+peer.name+":6222", fmt.Sprintf("nats-route://127.0.0.1:%d", peer.route))
		}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, "cluster.conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, n.name+".conf"), own, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// leaderOf names the server leading the consumer (or, failing that, the
// APPROVALS stream).
func leaderOf(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer); err == nil {
		if info, err := c.Info(ctx); err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			return info.Cluster.Leader
		}
	}
	if s, err := js.Stream(ctx, topology.ApprovalsStream); err == nil {
		if info, err := s.Info(ctx); err == nil && info.Cluster != nil {
			return info.Cluster.Leader
		}
	}
	return ""
}

// replicated reports whether the streams and the consumer have a leader and
// all their replicas current on their three nodes.
func replicated(js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	check := func(what string, replicas int, ci *jetstream.ClusterInfo) error {
		if replicas != 3 {
			return fmt.Errorf("%s has %d replicas, want 3", what, replicas)
		}
		if ci == nil || ci.Leader == "" {
			return fmt.Errorf("%s has no leader", what)
		}
		if len(ci.Replicas) != 2 {
			return fmt.Errorf("%s has %d followers, want 2", what, len(ci.Replicas))
		}
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return fmt.Errorf("%s: replica %s not current", what, p.Name)
			}
		}
		return nil
	}
	for _, name := range []string{topology.ApprovalsStream, topology.ReceiptsStream, topology.DeadLetterStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if err := check("stream "+name, info.Config.Replicas, info.Cluster); err != nil {
			return err
		}
	}
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		return err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	return check("consumer "+topology.Consumer, info.Config.Replicas, info.Cluster)
}

func TestClusterThreeNodesR3SurvivesANodeKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster test builds nats-server and runs three nodes for a minute or more")
	}
	began := time.Now()
	bin := natsServerBinary(t)
	dir := t.TempDir()

	// Three nodes from deploy/nats, on loopback ports.
	var nodes []*natsNode
	byName := map[string]*natsNode{}
	for i := 1; i <= 3; i++ {
		n := &natsNode{name: fmt.Sprintf("nats-%d", i), bin: bin, log: &syncBuffer{},
			client: freePort(t), route: freePort(t), monitor: freePort(t)}
		n.dir = filepath.Join(dir, n.name)
		nodes = append(nodes, n)
		byName[n.name] = n
	}
	clusterConfig(t, nodes)
	for _, n := range nodes {
		n.start(t)
		t.Cleanup(func() {
			n.stop(syscall.SIGTERM)
			if t.Failed() {
				t.Logf("%s output (last 6 KiB):\n%s", n.name, tail(n.log.String(), 6<<10))
			}
		})
	}
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.url()
	}
	servers := strings.Join(urls, ",")
	waitFor(t, 60*time.Second, "the three nodes to report healthy", func() bool {
		for _, n := range nodes {
			if !n.healthy() {
				return false
			}
		}
		return true
	})
	formed := time.Since(began)

	nc, js := testenv.Connect(t, servers, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond), nats.Name("cluster-test"))

	// The topology at three replicas, exactly as the executors set it up
	// (--replicas 3 --ack-wait 2s --max-deliver 10).
	topo := topology.Config{Replicas: 3, AckWait: 2 * time.Second, MaxDeliver: 10}
	waitFor(t, 60*time.Second, "the R3 streams and consumer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := topology.Ensure(ctx, js, topo)
		return err == nil
	})
	waitFor(t, 60*time.Second, "every replica to be current", func() bool { return replicated(js) == nil })

	// The task service and three executors, each its own process, each
	// given all three nodes.
	supervise(t, "service", func() *exec.Cmd { return roleCmd("service", filepath.Join(dir, "service"), servers, 0) })
	var addrs []string
	for i := 1; i <= 3; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		addrs = append(addrs, addr)
		startExecutor(t, servers, fmt.Sprintf("exec-%d", i), "--replicas", "3", "--ack-wait", "2s", "--max-deliver", "10",
			"--call-timeout", "5s", "--concurrency", "16", "--http", addr)
	}
	waitFor(t, 60*time.Second, "the executors to be ready", func() bool {
		for _, a := range addrs {
			if !ready(a) {
				return false
			}
		}
		return true
	})

	// The workload: new approvals, and every fourth send a resend of an
	// approval sent before.
	n := *clusterApprovals
	cand := scenario.Candidate()
	r := rand.New(rand.NewPCG(5, 6))
	var envelopes [][]byte
	var distinct [][]byte
	for i := 0; i < n; i++ {
		if i%4 == 3 {
			envelopes = append(envelopes, distinct[r.IntN(len(distinct))])
			continue
		}
		a, err := scenario.Generate(cand, "cluster", len(distinct)+1)
		if err != nil {
			t.Fatal(err)
		}
		distinct = append(distinct, a.Envelope())
		envelopes = append(envelopes, a.Envelope())
	}

	// Publish at a steady rate from several senders; each send is retried
	// with its own message id until the stream acknowledges it.
	type sendResult struct {
		seq uint64
		at  time.Time
	}
	results := make([]sendResult, len(envelopes))
	var retries atomic.Int64
	pubCtx, cancelPub := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelPub()
	flowStart := time.Now()
	interval := *clusterDuration / time.Duration(len(envelopes))
	var wg sync.WaitGroup
	senders := max(*clusterSenders, 1)
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := s; i < len(envelopes); i += senders {
				time.Sleep(time.Until(flowStart.Add(time.Duration(i) * interval)))
				id := send.NewMsgID()
				for pubCtx.Err() == nil {
					ctx, cancel := context.WithTimeout(pubCtx, 3*time.Second)
					sent, err := testenv.Publish(ctx, js, envelopes[i], send.MsgID(id))
					cancel()
					if err == nil {
						results[i] = sendResult{seq: sent.StreamSeq, at: time.Now()}
						break
					}
					retries.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}(s)
	}

	// A quarter of the way in, SIGKILL the node leading the consumer; bring
	// it back later with the same configuration and store.
	var victim *natsNode
	var killedAt, restartedAt time.Time
	if *clusterKill {
		victim, killedAt, restartedAt = killAndRestart(t, js, byName, flowStart)
	}

	wg.Wait()
	if pubCtx.Err() != nil {
		t.Fatal("publishing did not finish in time")
	}
	publishTook := time.Since(flowStart)
	whileDown := 0
	var firstAfterKill time.Time
	seqs := map[uint64]int{}
	for i, res := range results {
		if res.at.After(killedAt) && res.at.Before(restartedAt) {
			whileDown++
			if firstAfterKill.IsZero() || res.at.Before(firstAfterKill) {
				firstAfterKill = res.at
			}
		}
		if prev, dup := seqs[res.seq]; dup {
			t.Fatalf("sends %d and %d were stored as one message %d", prev, i, res.seq)
		}
		seqs[res.seq] = i
	}
	if *clusterKill && whileDown == 0 {
		t.Error("no approval was stored while the node was down")
	}
	failover := firstAfterKill.Sub(killedAt)
	killed := "no node was killed"
	if victim != nil {
		killed = fmt.Sprintf("%d stored while %s was down, the first %s after the kill", whileDown, victim.name, failover.Round(time.Millisecond))
	}

	// Wait until every message is finished and the consumer has nothing
	// left.
	var in *audit.Input
	waitFor(t, 3*time.Minute, "every message to have a terminal receipt", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		in, err = audit.Load(ctx, nc)
		if err != nil {
			return false
		}
		for s := range seqs {
			_, dead := in.DeadLetters[s]
			if len(in.Receipts[s]) == 0 && !dead {
				return false
			}
		}
		return in.Consumer.Pending == 0 && in.Consumer.AckPending == 0
	})
	// The last receipt's time stamp (same machine, same clock) says when the
	// work was done, whatever the polling above added.
	// The longest pause between two receipts is how long the fail-over
	// stopped the work.
	var stamps []time.Time
	for _, rs := range in.Receipts {
		for _, r := range rs {
			if at, err := time.Parse(time.RFC3339Nano, r.IssuedAt); err == nil {
				stamps = append(stamps, at)
			}
		}
	}
	sort.Slice(stamps, func(i, j int) bool { return stamps[i].Before(stamps[j]) })
	var pause time.Duration
	var pauseAt time.Time
	for i := 1; i < len(stamps); i++ {
		if d := stamps[i].Sub(stamps[i-1]); d > pause {
			pause, pauseAt = d, stamps[i-1]
		}
	}
	finished := stamps[len(stamps)-1].Sub(flowStart)

	// Nothing lost, nothing doubled.
	rep := audit.Verify(in)
	var vb strings.Builder
	verify.PrintReport(&vb, rep)
	if !rep.OK {
		t.Fatalf("verify after the node kill:\n%s", vb.String())
	}
	if len(in.Messages) != len(envelopes) {
		t.Errorf("the APPROVALS stream holds %d messages for %d sends", len(in.Messages), len(envelopes))
	}
	if len(in.DeadLetters) != 0 {
		t.Errorf("%d dead letters; every approval should have been carried out", len(in.DeadLetters))
	}
	// Every receipt is created or replayed; an intent has at most one
	// created receipt (a resend may overtake its original, and a created
	// whose reply was lost comes back as replayed), and all name one task.
	outcomes := map[string]int{}
	receipts := 0
	taskOf := map[string]string{}
	createdOf := map[string]int{}
	for s := range seqs {
		for _, r := range in.Receipts[s] {
			receipts++
			outcomes[r.Outcome]++
			if r.Outcome != document.OutcomeCreated && r.Outcome != document.OutcomeReplayed {
				t.Errorf("message %d: receipt %s", s, r.Outcome)
				continue
			}
			if r.Outcome == document.OutcomeCreated {
				if createdOf[*r.IntentID]++; createdOf[*r.IntentID] > 1 {
					t.Errorf("intent %s has %d created receipts", *r.IntentID, createdOf[*r.IntentID])
				}
			}
			if prev, ok := taskOf[*r.IntentID]; ok && prev != *r.TaskID {
				t.Errorf("intent %s names tasks %s and %s", *r.IntentID, prev, *r.TaskID)
			}
			taskOf[*r.IntentID] = *r.TaskID
		}
	}
	c := in.Counts
	if c.CreatesExecuted != int64(len(distinct)) || c.TasksExisting != int64(len(distinct)) || len(taskOf) != len(distinct) {
		t.Errorf("creates %d, tasks %d, intents with a task %d; want %d of each", c.CreatesExecuted, c.TasksExisting, len(taskOf), len(distinct))
	}
	if err := replicated(js); err != nil {
		t.Errorf("after the restart: %v", err)
	}

	// The executors' metrics agree: every message was answered, and the
	// consumer's lag drains to 0.
	var counted, redeliveries float64
	buckets := map[float64]float64{}
	for _, a := range addrs {
		m := scrape(t, a)
		for _, o := range []string{document.OutcomeCreated, document.OutcomeReplayed, document.OutcomeConflict, document.OutcomeRejected, document.OutcomeDeadLettered} {
			counted += m[`sendtwice_receipts_total{outcome="`+o+`"}`]
		}
		redeliveries += m["sendtwice_redeliveries_total"]
		for k, v := range m {
			if le, ok := strings.CutPrefix(k, `sendtwice_processing_seconds_bucket{le="`); ok {
				if bound, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64); err == nil {
					buckets[bound] += v
				}
			}
		}
	}
	latency := fmt.Sprintf("p50 %s, p99 %s", quantile(0.5, buckets), quantile(0.99, buckets))
	if counted < float64(len(envelopes)) || counted > float64(receipts) {
		t.Errorf("the executors counted %v receipts; want between %d messages and %d stored receipts", counted, len(envelopes), receipts)
	}
	waitFor(t, 30*time.Second, "every executor to report a consumer lag of 0", func() bool {
		for _, a := range addrs {
			v, ok := scrape(t, a)["sendtwice_consumer_lag"]
			if !ok || v != 0 {
				return false
			}
		}
		return true
	})

	// The command gives the same verdict over the cluster.
	verdict, errOut, err := runCLI(context.Background(), "verify", "--server", servers)
	if err != nil {
		t.Fatalf("executor verify: %v\n%s%s", err, verdict, errOut)
	}

	// Sizing figures: bytes per message in the streams, on each node's disk,
	// and in the task service's database.
	var sizes []string
	for _, name := range []string{topology.ApprovalsStream, topology.ReceiptsStream} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if st, err := js.Stream(ctx, name); err == nil && st.CachedInfo().State.Msgs > 0 {
			state := st.CachedInfo().State
			sizes = append(sizes, fmt.Sprintf("%s %d B/msg", name, state.Bytes/state.Msgs))
		}
		cancel()
	}
	for _, n := range nodes {
		sizes = append(sizes, fmt.Sprintf("%s disk %.1f MiB", n.name, float64(dirSize(filepath.Join(n.dir, "jetstream")))/(1<<20)))
	}
	sizes = append(sizes, fmt.Sprintf("service disk %.1f MiB", float64(dirSize(filepath.Join(dir, "service")))/(1<<20)))

	t.Logf("cluster run: 3 nodes (R3), 3 executors; %d approvals (%d distinct, %d resends) published in %s with %d publish retries;\n"+
		"  %s;\n"+
		"  the last receipt %s after the first send; the longest pause between receipts %s, from %s; cluster formed in %s; whole test %s\n"+
		"  receipts stored %d (by outcome %v), redeliveries counted by executors %v; service: requests %d, creates %d, tasks %d\n"+
		"  processing: %s\n  sizes: %s\n%s",
		len(envelopes), len(distinct), len(envelopes)-len(distinct), publishTook.Round(time.Millisecond), retries.Load(), killed,
		finished.Round(time.Millisecond), pause.Round(time.Millisecond), pauseAt.Sub(flowStart).Round(time.Millisecond), formed.Round(time.Millisecond), time.Since(began).Round(time.Millisecond),
		receipts, outcomes, redeliveries, c.RequestsReceived, c.CreatesExecuted, c.TasksExisting,
		latency, strings.Join(sizes, ", "), verdict)
}

// killAndRestart waits a quarter of the run, SIGKILLs the node leading the
// consumer, and starts it again after --cluster.down with the same
// configuration and store, waiting until it reports healthy.
func killAndRestart(t *testing.T, js jetstream.JetStream, byName map[string]*natsNode, flowStart time.Time) (victim *natsNode, killedAt, restartedAt time.Time) {
	t.Helper()
	time.Sleep(time.Until(flowStart.Add(*clusterDuration / 4)))
	victimName := leaderOf(js)
	victim = byName[victimName]
	if victim == nil {
		t.Fatalf("no node leads the consumer (leader %q)", victimName)
	}
	killedAt = time.Now()
	victim.stop(syscall.SIGKILL)
	t.Logf("SIGKILL %s (leader of consumer %s) at %s", victim.name, topology.Consumer, killedAt.Sub(flowStart).Round(time.Millisecond))
	time.Sleep(*clusterDown)
	newLeader := leaderOf(js)
	restartedAt = time.Now()
	victim.start(t)
	waitFor(t, 90*time.Second, victim.name+" to report healthy after its restart", victim.healthy)
	caughtUp := time.Since(restartedAt)
	t.Logf("restarted %s after %s down; healthy again %s later; consumer leader meanwhile %s",
		victim.name, restartedAt.Sub(killedAt).Round(time.Millisecond), caughtUp.Round(time.Millisecond), newLeader)
	if newLeader == "" || newLeader == victim.name {
		t.Errorf("while %s was down the consumer's leader was %q: no fail-over", victim.name, newLeader)
	}
	return victim, killedAt, restartedAt
}

// quantile estimates a quantile from cumulative histogram buckets (upper
// bound -> count), interpolating within a bucket as histogram_quantile does.
func quantile(q float64, buckets map[float64]float64) string {
	bounds := make([]float64, 0, len(buckets))
	for b := range buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 || buckets[bounds[len(bounds)-1]] == 0 {
		return "n/a"
	}
	total := buckets[bounds[len(bounds)-1]]
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		c := buckets[b]
		if c < rank {
			lower, below = b, c
			continue
		}
		if math.IsInf(b, 1) {
			return fmt.Sprintf("> %gs", lower)
		}
		return time.Duration((lower + (b-lower)*(rank-below)/(c-below)) * float64(time.Second)).Round(time.Millisecond / 10).String()
	}
	return "n/a"
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// tail returns the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
