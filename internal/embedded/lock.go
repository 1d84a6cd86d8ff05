package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrDirLocked means that another process (or another stack in this one)
// holds the data directory.
var ErrDirLocked = errors.New("embedded: data directory in use")

// LockFile is the file in a data directory whose lock its user holds.
const LockFile = "LOCK"

// DirLock is the exclusive hold of one process on a data directory. The
// operating system drops it when the process ends, however it ends.
type DirLock struct {
	f    *os.File
	dir  string // absolute
	path string
}

// Dir is the locked directory as an absolute path.
func (l *DirLock) Dir() string { return l.dir }

// LockDir creates dir if needed and locks it, without waiting: if another
// process holds it, the error (wrapping ErrDirLocked) names the directory
// and, when known, that process's id.
func LockDir(dir string) (*DirLock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded: data directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("embedded: data directory %s: %w", abs, err)
	}
	path := filepath.Join(abs, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("embedded: data directory %s: %w", abs, err)
	}
	held, err := lockFile(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("embedded: lock data directory %s: %w", abs, err)
	}
	if !held {
		owner := ""
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				owner = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s: another process%s holds it (one service per data directory); stop it, or give this one another data directory", ErrDirLocked, abs, owner)
	}
	// Say who holds it, for the next one that asks.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f, dir: abs, path: path}, nil
}

// Unlock releases the directory.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := unlockFile(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("embedded: unlock %s: %w", l.path, err)
	}
	return nil
}
