//go:build !linux

package bench

import "syscall"

// setPdeathsig has no equivalent here: a killed bench leaves its private
// PostgreSQL server running until someone stops it.
func setPdeathsig(*syscall.SysProcAttr) {}
