package executor_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// roleEnv makes the test binary run one executor process (see TestMain).
const roleEnv = "EXECUTOR_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "executor" {
		os.Exit(runExecutorProcess())
	}
	os.Exit(m.Run())
}

// runExecutorProcess is an executor that kills itself (SIGKILL, as a crash
// would) the n-th time it reaches the fault point named in
// EXECUTOR_TEST_KILL_AT, after flushing what it has published so that the
// server has it. EXECUTOR_TEST_ACK_WAIT and EXECUTOR_TEST_MAX_DELIVER, when
// set, replace those of testenv.Topology.
func runExecutorProcess() int {
	nc, err := nats.Connect(os.Getenv("EXECUTOR_TEST_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	point := executor.Point(os.Getenv("EXECUTOR_TEST_KILL_AT"))
	nth, _ := strconv.Atoi(os.Getenv("EXECUTOR_TEST_KILL_NTH"))
	topo := testenv.Topology
	if d, err := time.ParseDuration(os.Getenv("EXECUTOR_TEST_ACK_WAIT")); err == nil {
		topo.AckWait = d
	}
	if n, err := strconv.Atoi(os.Getenv("EXECUTOR_TEST_MAX_DELIVER")); err == nil {
		topo.MaxDeliver = n
	}
	var mu sync.Mutex
	seen := 0
	ex, err := executor.New(nc, executor.Config{
		Gate:        &gate.Checker{AllowUnsigned: true},
		TaskService: provider.NewClient(nc).TaskService(),
		ID:          "exec-killed",
		Concurrency: 32,
		CallTimeout: 2 * time.Second,
		Topology:    topo,
		Logger:      testenv.Logger(),
		Fault: func(p executor.Point, seq, _ uint64, _ string) {
			if p != point {
				return
			}
			mu.Lock()
			seen++
			fire := seen == nth
			mu.Unlock()
			if fire {
				_ = nc.Flush()
				fmt.Printf("killed at %s, message %d\n", p, seq)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = ex.Run(context.Background(), nil)
	return 0
}

// killedExecutor runs an executor process that kills itself (SIGKILL) the
// nth time a delivery reaches point, and waits until it is dead; it returns
// what the process printed. The topology's AckWait and MaxDeliver apply when
// set.
func killedExecutor(t *testing.T, env *testenv.Env, point executor.Point, nth int, topo topology.Config) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=executor", "EXECUTOR_TEST_URL="+env.URL(),
		"EXECUTOR_TEST_KILL_AT="+string(point), "EXECUTOR_TEST_KILL_NTH="+strconv.Itoa(nth))
	if topo.AckWait > 0 {
		cmd.Env = append(cmd.Env, "EXECUTOR_TEST_ACK_WAIT="+topo.AckWait.String())
	}
	if topo.MaxDeliver > 0 {
		cmd.Env = append(cmd.Env, "EXECUTOR_TEST_MAX_DELIVER="+strconv.Itoa(topo.MaxDeliver))
	}
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the executor process ended without being killed (%v):\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the executor process never reached %s %d times:\n%s", point, nth, out.String())
	}
	return out.String()
}
