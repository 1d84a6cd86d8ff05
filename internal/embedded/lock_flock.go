//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package embedded

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f without waiting; held is false
// when another open file holds it.
func lockFile(f *os.File) (held bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
