//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package embedded

import "os"

// lockFile does not lock on this platform: only Pebble's own lock on the
// task service's store guards the directory, and it is taken after the
// NATS server has started.
func lockFile(*os.File) (bool, error) { return true, nil }

func unlockFile(*os.File) error { return nil }
