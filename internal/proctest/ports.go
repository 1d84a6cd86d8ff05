package proctest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// holdsPorts reports whether the process pid (with Group, any process of
// its group) holds a socket listening on each of p.Ports. It answers
// false while a port has no listener yet, errPortTaken when another
// process listens on one, and true where /proc cannot tell (not Linux).
func (p *Process) holdsPorts(pid int) (bool, error) {
	for _, port := range p.Ports {
		inodes, ok := listening(port)
		if !ok {
			return true, nil
		}
		if len(inodes) == 0 {
			return false, nil
		}
		pids := []int{pid}
		if p.Group {
			pids = groupOf(pid)
		}
		if !holdsAny(pids, inodes) {
			return false, fmt.Errorf("%s: %s: port %d is held by another process: %w", p.Rig, p.Name, port, errPortTaken)
		}
	}
	return true, nil
}

// listening returns the inodes of the TCP sockets (IPv4 and IPv6)
// listening on port, from /proc/net; ok is false when /proc/net/tcp
// cannot be read.
func listening(port int) (inodes map[string]bool, ok bool) {
	inodes = map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			if table == "/proc/net/tcp" {
				return nil, false
			}
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, found := strings.Cut(fields[1], ":")
			if n, err := strconv.ParseUint(hexPort, 16, 16); found && err == nil && int(n) == port {
				inodes[fields[9]] = true
			}
		}
		f.Close()
	}
	return inodes, true
}

// groupOf returns the processes of the process group led by pid.
func groupOf(pid int) []int {
	pids := []int{pid}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and ')'.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 3 || fields[2] != strconv.Itoa(pid) {
			continue
		}
		if other, err := strconv.Atoi(filepath.Base(filepath.Dir(stat))); err == nil && other != pid {
			pids = append(pids, other)
		}
	}
	return pids
}

// holdsAny reports whether one of pids has open one of the sockets inodes.
func holdsAny(pids []int, inodes map[string]bool) bool {
	for _, pid := range pids {
		fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
		for _, fd := range fds {
			target, err := os.Readlink(fd)
			if err != nil {
				continue
			}
			if inode, ok := strings.CutPrefix(target, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
				return true
			}
		}
	}
	return false
}
