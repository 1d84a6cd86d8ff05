package proctest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// serveEnv, set to a port, makes the test binary an HTTP server on it that
// answers with its pid: the process the tests start.
const serveEnv = "PROCTEST_SERVE_PORT"

func TestMain(m *testing.M) {
	if port := os.Getenv(serveEnv); port != "" {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, os.Getpid())
		}))
		os.Exit(4)
	}
	os.Exit(m.Run())
}

// server is a Process running the test binary as a server on port.
func server(t *testing.T, port int) *Process {
	dir := t.TempDir()
	p := &Process{Rig: "proctest", Name: "server", Argv: []string{os.Args[0]}, Dir: dir,
		Env: append(os.Environ(), serveEnv+"="+strconv.Itoa(port)), OutFile: filepath.Join(dir, "out"),
		Grace: time.Second, Tails: func() string { return "" }, Ports: []int{port}}
	t.Cleanup(p.Stop)
	return p
}

// stranger is another process's server on port: the test's own.
func stranger(t *testing.T, port int) {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "stranger") })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func url(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) + "/" }

// answeredBy is the body the server on port answers with.
func answeredBy(t *testing.T, port int) string {
	resp, err := http.Get(url(port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

var client = &http.Client{Timeout: time.Second}

// A process that holds its port is started, and it is the one answering.
func TestStartWaitsUntilTheProcessItselfAnswersOnItsPort(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			port := FreePort(t, "proctest")
			p := server(t, port)
			p.Group = group
			p.Start(t, url(port), client, 10*time.Second, 10*time.Millisecond)
			if got, want := answeredBy(t, port), strconv.Itoa(p.Pid()); got != want {
				t.Fatalf("the server on the port is pid %s, not the started %s", got, want)
			}
		})
	}
}

// Another process on the port answers the URL, but the start is refused
// as a port taken, not taken for the process's own answer.
func TestStartRefusesAPortAnotherProcessHolds(t *testing.T) {
	port := FreePort(t, "proctest")
	stranger(t, port)
	p := server(t, port)
	err := p.start(url(port), client, 10*time.Second, 10*time.Millisecond)
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a port another process holds: %v, want %v", err, errPortTaken)
	}
	if p.Running() {
		t.Fatal("the process is still running after a refused start")
	}
}

// When another process takes the port first, StartOnFreePorts starts the
// process again on other ports.
func TestStartOnFreePortsTriesOtherPortsWhenOneIsTaken(t *testing.T) {
	p := server(t, 0)
	var tried []int
	p.StartOnFreePorts(t, 1, func(ports []int) string {
		if len(tried) == 0 {
			stranger(t, ports[0])
		}
		tried = append(tried, ports[0])
		p.Env = append(os.Environ(), serveEnv+"="+strconv.Itoa(ports[0]))
		return url(ports[0])
	}, client, 10*time.Second, 10*time.Millisecond)
	if len(tried) != 2 || tried[0] == tried[1] {
		t.Fatalf("ports tried: %v, want two different ones", tried)
	}
	if got, want := answeredBy(t, tried[1]), strconv.Itoa(p.Pid()); got != want {
		t.Fatalf("the server on port %d is %s, not the started pid %s", tried[1], got, want)
	}
}
