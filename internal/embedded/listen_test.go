package embedded

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestABusyPortIsReportedAtOnceAsInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	start := time.Now()
	s, err := Start(Options{Dir: t.TempDir(), Host: "127.0.0.1", Port: port})
	if err == nil {
		s.Shutdown()
		t.Fatal("the server started on a busy port")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the error took %v", took)
	}
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(port)) ||
		!strings.Contains(err.Error(), "in use") {
		t.Errorf("the error is %q; want it to say that the address is in use, naming it", err)
	}
}
