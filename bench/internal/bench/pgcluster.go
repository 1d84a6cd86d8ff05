package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned by findPostgres when no PostgreSQL server
// binaries are installed.
var ErrNoPostgres = errors.New("bench: no PostgreSQL found (looked for initdb and postgres in PATH and in /usr/lib/postgresql/*/bin; Debian's package is postgresql)")

// pgDebianBinDirs is where Debian's packages install each major version's
// server programs.
var pgDebianBinDirs = "/usr/lib/postgresql/*/bin"

// pgBinaries are the PostgreSQL server programs a private cluster needs.
type pgBinaries struct {
	initdb, postgres string
	version          string // "postgres (PostgreSQL) 15.x"
}

// findPostgres looks for initdb and postgres side by side: first in PATH,
// then in Debian's /usr/lib/postgresql/<major>/bin, newest major first
// (Debian's package installs them there, outside PATH).
func findPostgres() (*pgBinaries, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		// A link in PATH (e.g. /usr/local/bin/initdb) points into the
		// directory that also holds the matching postgres.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	debian, _ := filepath.Glob(pgDebianBinDirs)
	slices.SortFunc(debian, func(a, b string) int {
		ma, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		mb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return mb - ma
	})
	dirs = append(dirs, debian...)
	for _, d := range dirs {
		b := &pgBinaries{initdb: filepath.Join(d, "initdb"), postgres: filepath.Join(d, "postgres")}
		if !executable(b.initdb) || !executable(b.postgres) {
			continue
		}
		out, err := exec.Command(b.postgres, "--version").Output()
		if err != nil {
			continue
		}
		b.version = strings.TrimSpace(string(out))
		return b, nil
	}
	return nil, ErrNoPostgres
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// pgCluster is a private PostgreSQL cluster for one measurement: its data
// directory and its Unix socket in a temporary directory, no TCP listener,
// trust authentication for the one superuser, stopped and removed by stop.
type pgCluster struct {
	bin     *pgBinaries
	dir     string // holds data/, the socket and the server's log
	cmd     *exec.Cmd
	exited  chan error
	logPath string
	// DSN to connect with (through the Unix socket).
	dsn string
}

// pgUser is the superuser of a private cluster.
const pgUser = "bench"

// startPostgres makes a new cluster with initdb and starts its server with
// the durability a PostgreSQL ledger is deployed with: fsync on,
// synchronous_commit on (a commit returns only after its WAL is flushed),
// full_page_writes on. maxConns bounds the connections it accepts.
//
// PostgreSQL refuses to run as root. When this process is root (as in CI),
// initdb and the server run as the "postgres" user (Debian's package makes
// it), or as "nobody" where there is none, by setting the child processes'
// credentials directly (no su, runuser or sudo needed); the temporary
// directory is then owned by that user. The directory is made in the system
// temporary directory, not under the bench's data directory, because that
// one may not be reachable by another user.
func startPostgres(ctx context.Context, bin *pgBinaries, maxConns int) (*pgCluster, error) {
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	base := os.TempDir()
	if cred != nil && !traversable(base) {
		base = "/tmp" // TMPDIR is private to root
	}
	dir, err := os.MkdirTemp(base, "sendtwice-pg-")
	if err != nil {
		return nil, fmt.Errorf("bench: a directory for PostgreSQL: %w", err)
	}
	c := &pgCluster{bin: bin, dir: dir, logPath: filepath.Join(dir, "postgres.log")}
	ok := false
	defer func() {
		if !ok {
			c.stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("bench: handing %s to the PostgreSQL user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")

	initdb := exec.CommandContext(ctx, bin.initdb, "-D", data, "-U", pgUser, "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-instructions",
		// initdb's own files need not reach the disk: the cluster is
		// thrown away. What the measurement writes is synced by the
		// server (fsync = on below).
		"--no-sync")
	c.setup(initdb, cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: initdb: %w: %s", err, bytes.TrimSpace(out))
	}

	logf, err := os.Create(c.logPath)
	if err != nil {
		return nil, fmt.Errorf("bench: the PostgreSQL log: %w", err)
	}
	defer logf.Close()
	// The server runs as this process's child (not daemonised by pg_ctl), so
	// that stop can end it by its pid, and so that it dies with this process
	// on Linux (see setPdeathsig).
	c.cmd = exec.Command(bin.postgres, "-D", data,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories="+dir,
		"-c", "port=5432",
		"-c", "max_connections="+strconv.Itoa(maxConns+5),
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		"-c", "full_page_writes=on",
		"-c", "shared_buffers=256MB",
		"-c", "log_min_messages=warning")
	c.setup(c.cmd, cred)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		c.cmd = nil
		return nil, fmt.Errorf("bench: starting postgres: %w", err)
	}
	c.exited = make(chan error, 1)
	go func() { c.exited <- c.cmd.Wait() }()
	c.dsn = fmt.Sprintf("host=%s port=5432 user=%s dbname=postgres sslmode=disable", dir, pgUser)

	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// waitReady waits until the server accepts a connection, and fails when it
// ends first or does not accept one within a minute.
func (c *pgCluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.dsn)
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case werr := <-c.exited:
			c.exited <- werr
			return fmt.Errorf("bench: postgres ended at start (%v): %s", werr, c.logTail())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench: postgres does not accept connections: %w: %s", err, c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setup runs cmd in the cluster's directory, as the PostgreSQL user when
// cred is set.
func (c *pgCluster) setup(cmd *exec.Cmd, cred *syscall.Credential) {
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	setPdeathsig(cmd.SysProcAttr)
	// A locale the C library of a minimal system has.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
}

// pgCredential is nil when this process may run PostgreSQL itself, and
// otherwise (as root) the user it runs as instead.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("bench: running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as (it refuses root)")
}

// traversable reports whether every directory from dir up to the root lets
// other users through, as the PostgreSQL user must reach its directory.
func traversable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// logTail is the end of the server's log, for an error message.
func (c *pgCluster) logTail() string {
	b, _ := os.ReadFile(c.logPath)
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// stopChild sends sig to a child process and waits for it to exit (exited
// is its Wait's result), killing it after grace.
func stopChild(p *os.Process, sig os.Signal, exited <-chan error, grace time.Duration) {
	_ = p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
	}
}

// stop shuts the server down (fast shutdown: SIGINT, then SIGKILL after 30 s)
// and removes the cluster.
func (c *pgCluster) stop() {
	if c == nil {
		return
	}
	if c.cmd != nil && c.exited != nil {
		stopChild(c.cmd.Process, syscall.SIGINT, c.exited, 30*time.Second)
	}
	_ = os.RemoveAll(c.dir)
}
