package proctest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreePort returns a port on 127.0.0.1 that was free a moment ago. rig
// starts the test's failure message ("davtest").
func FreePort(t testing.TB, rig string) int { return FreePorts(t, rig, 1)[0] }

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago: each is held until all are found, so that none is handed out twice
// (a port let go may be the next one the system picks).
func FreePorts(t testing.TB, rig string, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("%s: finding a free port: %v", rig, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// Process is a server process, started and stopped again as often as a
// test needs. Set its fields before the first Start.
type Process struct {
	// Rig and Name start the failure messages: "davtest: radicale ...".
	Rig, Name string
	// Argv, Dir and Env are the command's; its stdout and stderr are
	// appended to OutFile.
	Argv    []string
	Dir     string
	Env     []string
	OutFile string
	// Group runs the command in a process group of its own and signals
	// the group (a server that forks workers).
	Group bool
	// Grace is how long Stop waits after SIGTERM before SIGKILL.
	Grace time.Duration
	// Tails says, for a failure's message, what the logs end with.
	Tails func() string
	// Ports are the ports the process listens on. When set, Start waits
	// until the process (or, with Group, its group) holds each one: a
	// port another process took between FreePorts and the bind would
	// answer the URL for it, and the rig would talk to a stranger.
	Ports []int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs the command and waits until url answers a GET through client
// (any status), polling every poll, and until the process holds its
// Ports; it fails the test when the process exits first, when another
// process holds one of the Ports, or when timeout passes (stopping the
// process).
func (p *Process) Start(t testing.TB, url string, client *http.Client, timeout, poll time.Duration) {
	t.Helper()
	if err := p.start(url, client, timeout, poll); err != nil {
		t.Fatal(err)
	}
}

// StartOnFreePorts finds n free ports, has listen set the command up for
// them (its Argv, configuration files) and return the URL to poll, and
// starts the process on them as Start does. When another process took one
// of the ports before the command could bind it, it stops the command and
// tries again with other ports, up to three times.
func (p *Process) StartOnFreePorts(t testing.TB, n int, listen func(ports []int) (url string), client *http.Client, timeout, poll time.Duration) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p.Ports = FreePorts(t, p.Rig, n)
		err := p.start(listen(p.Ports), client, timeout, poll)
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; trying other ports", err)
	}
}

// errPortTaken is a start that found one of its ports held by another
// process.
var errPortTaken = errors.New("a port was taken by another process")

func (p *Process) start(url string, client *http.Client, timeout, poll time.Duration) error {
	out, err := os.OpenFile(p.OutFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	cmd.Stdout = out
	cmd.Stderr = out
	if p.Group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: starting %s: %w", p.Rig, p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()

	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			err := fmt.Errorf("%s: %s exited while starting (%v).\n%s", p.Rig, p.Name, cmd.ProcessState, p.Tails())
			if _, taken := p.holdsPorts(cmd.Process.Pid); errors.Is(taken, errPortTaken) {
				err = fmt.Errorf("%w: %w", taken, err)
			}
			return err
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			held, err := p.holdsPorts(cmd.Process.Pid)
			if err != nil {
				p.Stop()
				return err
			}
			if held {
				return nil
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("%s: %s did not answer on %s (and hold its ports %v) within %s: %v\n%s", p.Rig, p.Name, url, p.Ports, timeout, err, p.Tails())
		}
		time.Sleep(poll)
	}
}

// Stop stops the process: SIGTERM, then SIGKILL after Grace. Stopping a
// stopped process does nothing.
func (p *Process) Stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	signal := func(sig syscall.Signal) {
		if p.Group {
			_ = syscall.Kill(-cmd.Process.Pid, sig)
		} else {
			_ = cmd.Process.Signal(sig)
		}
	}
	signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(p.Grace):
		signal(syscall.SIGKILL)
		<-exited
	}
}

// Running reports whether the process is running.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// TailOf returns the last n bytes of a file from a line's start, or a note
// that it cannot be read.
func TailOf(path string, n int) string {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "(" + path + " does not exist)"
	}
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Pid is the process's id, 0 when it is not started.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Get fetches url with a short timeout and returns its status and body: a
// look at a process's health, readiness or metrics endpoint.
func Get(url string) (status int, body string, err error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
