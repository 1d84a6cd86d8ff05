package proctest

import (
	"net"
	"strconv"
	"testing"
)

// The ports FreePorts hands out are distinct, and each is free to listen on.
func TestFreePortsHandsOutDistinctPortsEachFree(t *testing.T) {
	ports := FreePorts(t, "proctest", 64)
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}
