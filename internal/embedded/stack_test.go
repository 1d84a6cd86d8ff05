package embedded_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/proctest"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// start starts a stack with opts, logging nothing, and closes it at the
// test's end.
func start(t *testing.T, opts embedded.StackOptions) (*embedded.Stack, error) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	st, err := embedded.StartStack(opts)
	if err == nil {
		t.Cleanup(func() { _ = st.Close() })
	}
	return st, err
}

// client connects to the stack's NATS server, until the test's end, and
// returns a client of its task service.
func client(t *testing.T, st *embedded.Stack) *provider.Client {
	t.Helper()
	nc, _ := testenv.Connect(t, st.URL())
	return provider.NewClient(nc)
}

func TestTheDataDirectoryIsLockedBeforeAnythingStarts(t *testing.T) {
	dir := t.TempDir()
	first, err := start(t, embedded.StackOptions{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a second stack on the same directory fails before it starts a server", func(t *testing.T) {
		port := proctest.FreePort(t, "embedded")
		second, err := start(t, embedded.StackOptions{Dir: dir, Port: port})
		if err == nil {
			t.Fatalf("a second stack started on %s at %s", dir, second.URL())
		}
		abs, _ := filepath.Abs(dir)
		if !errors.Is(err, embedded.ErrDirLocked) || !strings.Contains(err.Error(), abs) || !strings.Contains(err.Error(), "another process") {
			t.Errorf("error %v; want ErrDirLocked naming %s", err, abs)
		}
		l, lerr := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if lerr != nil {
			t.Fatalf("port %d is taken: the refused stack started a server: %v", port, lerr)
		}
		_ = l.Close()
	})
	t.Run("the first stack still serves", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := client(t, first).Info(ctx)
		if err != nil || info.StoreID != first.Store.ID() {
			t.Errorf("info %+v, %v", info, err)
		}
	})
	t.Run("once the first has closed, the directory can be used again", func(t *testing.T) {
		id := first.Store.ID()
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := start(t, embedded.StackOptions{Dir: dir, Port: -1})
		if err != nil {
			t.Fatal(err)
		}
		if again.Store.ID() != id {
			t.Errorf("store id %s, want %s kept", again.Store.ID(), id)
		}
	})
}

func TestAStackKeepsTheStoreItsDeploymentAdopted(t *testing.T) {
	st, err := start(t, embedded.StackOptions{Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	adopted := st.Store.ID()
	original := filepath.Join(st.Dir(), "provider")
	fresh := filepath.Join(t.TempDir(), "fresh")
	if err := st.StopService(); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		dir      string
		replaces string
		refused  string // "" when it must serve
		want     string // the store id that must serve, when it serves
	}{
		{"a new store on the stack's NATS data is refused, saying what to do here", fresh, "", "empty data directory for a new deployment", ""},
		{"the adopted store serves again", original, "", "", adopted},
		{"a replacement that names no store is refused", fresh, "none", "", ""},
		{"a new store that replaces the adopted one by name serves", fresh, adopted, "", "new"},
		{"then the original store is refused", original, "", "this store is not the one the deployment adopted", ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			var err error
			switch s.replaces {
			case "":
				err = st.StartService(s.dir)
			case "none":
				err = st.StartServiceReplacing(s.dir, "")
			default:
				err = st.StartServiceReplacing(s.dir, s.replaces)
			}
			if s.want == "" {
				if err == nil {
					_ = st.StopService()
					t.Fatal("it served")
				}
				if s.refused != "" && (!errors.Is(err, provider.ErrNotAdopted) || !strings.Contains(err.Error(), s.refused)) {
					t.Errorf("error %v; want ErrNotAdopted saying %q", err, s.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.StopService() }()
			id := st.Store.ID()
			if s.want == "new" && id == adopted || s.want != "new" && id != s.want {
				t.Errorf("serving store %s (adopted was %s), want %s", id, adopted, s.want)
			}
		})
	}
}

// The stack hands its key lifetime, records retention and compaction
// period to the task service: with no allowance or margin, a key whose
// approval expired is compacted at the next period, and its records are
// removed after the retention.
func TestTheStackGivesItsTaskServiceItsKeyLifetimeRetentionAndCompactionPeriod(t *testing.T) {
	st, err := start(t, embedded.StackOptions{Dir: t.TempDir(), Port: -1,
		KeyClockAllowance: -1, KeyMargin: -1, RecordsRetention: time.Second, CompactEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := provider.NewRequest("intent-expired", provider.Task{Title: "an approval that expired"})
	if err != nil {
		t.Fatal(err)
	}
	// Expiring in two seconds: a call for a new key whose deadline has
	// passed is refused (key_deadline), so the key is made just before.
	req.NotAfter = time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	if res, err := c.Create(ctx, req); err != nil || res.Outcome != provider.OutcomeCreated {
		t.Fatalf("create: %+v, %v", res, err)
	}
	for {
		keys, _ := st.Store.KeyStats()
		if keys.Compacted == 1 && keys.RecordsRetired == 2 && keys.Live == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the key was not compacted, or its records not retired: %+v", keys)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
