package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// hostService serves the store in dir on the server at url in this process
// until stopped.
func hostService(t *testing.T, url, dir string) *provider.Hosted {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	h, err := provider.Host(dir, provider.Options{Logger: quiet}, provider.ServiceConfig{Logger: quiet},
		func() (*nats.Conn, error) { return nats.Connect(url) })
	if err != nil {
		t.Fatalf("serving %s: %v", dir, err)
	}
	return h
}

// adoptionRecord reads the adoption record's value and revision.
func adoptionRecord(t *testing.T, url string) (string, uint64) {
	t.Helper()
	nc, js := testenv.Connect(t, url)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, provider.AdoptionBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, provider.AdoptionKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value()), e.Revision()
}

func TestAdoptReplacesTheStoreOnlyWhenTold(t *testing.T) {
	url := startNATS(t)
	dirA, dirB := t.TempDir(), filepath.Join(t.TempDir(), "new-store")
	h := hostService(t, url, dirA)
	idA := h.Store.ID()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client := provider.NewClient(nc)
	req := request("intent-0001", "check items")
	if resp, err := client.Create(context.Background(), req); err != nil || resp.Outcome != provider.OutcomeCreated {
		t.Fatalf("create: %+v, %v", resp, err)
	}

	t.Run("adopt is refused while the adopted store serves", func(t *testing.T) {
		_, _, err := invoke(t, url, "adopt", "--data", dirB, "--replace", idA)
		if !errors.Is(err, provider.ErrAdoptRefused) || !strings.Contains(err.Error(), "answers a micro PING") {
			t.Errorf("adopt: %v", err)
		}
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Run("serve on another store is refused, naming the adopted one and the command that would replace it", func(t *testing.T) {
		_, _, err := invoke(t, url, "serve", "--data", dirB)
		for _, want := range []string{idA, "data directory " + dirA, "provider adopt --data " + dirB + " --replace " + idA} {
			if !errors.Is(err, provider.ErrNotAdopted) || !strings.Contains(err.Error(), want) {
				t.Errorf("serve: %v; want ErrNotAdopted saying %q", err, want)
			}
		}
	})
	before, rev := adoptionRecord(t, url)
	refusals := []struct {
		name string
		args []string
		want []string
	}{
		{"adopt without naming the replaced store is refused, naming it", []string{"adopt", "--data", dirB},
			[]string{"name the adopted store with --replace", idA, dirA}},
		{"adopt naming a store that is not the adopted one is refused, naming the adopted one", []string{"adopt", "--data", dirB, "--replace", "store-00000000000000ff"},
			[]string{"store-00000000000000ff is not the adopted store", idA}},
	}
	for _, tc := range refusals {
		t.Run(tc.name+", and changes nothing", func(t *testing.T) {
			out, _, err := invoke(t, url, tc.args...)
			if !errors.Is(err, provider.ErrAdoptRefused) || out != "" {
				t.Fatalf("adopt: %q, %v; want a refusal", out, err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
			if after, again := adoptionRecord(t, url); after != before || again != rev {
				t.Errorf("record %s (revision %d), want %s (revision %d)", after, again, before, rev)
			}
		})
	}
	t.Run("a usage error opens no store", func(t *testing.T) {
		fresh := filepath.Join(t.TempDir(), "never")
		if _, _, err := invoke(t, url, "adopt", "--data", fresh, "--replace", "A"); !errors.Is(err, errUsage) {
			t.Fatalf("adopt: %v, want a usage error", err)
		}
		if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v; want it never made", fresh, err)
		}
	})

	var idB string
	t.Run("adopt naming the adopted store adopts the new one and says plainly what that costs", func(t *testing.T) {
		out, _, err := invoke(t, url, "adopt", "--data", dirB, "--replace", idA)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"replacing " + idA, "DANGER", "created again", idA + " is now refused",
			"tasks existing 0", "Next: provider serve --data " + dirB} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not say %q:\n%s", want, out)
			}
		}
		rec, _ := adoptionRecord(t, url)
		var a provider.Adoption
		if err := json.Unmarshal([]byte(rec), &a); err != nil || a.Replaces != idA || a.Path != dirB || a.How != provider.AdoptedByOperator {
			t.Fatalf("record %s: %v", rec, err)
		}
		idB = a.StoreID
		if !strings.HasPrefix(out, "adopted "+idB+" ("+dirB+")") {
			t.Errorf("output does not name %s first:\n%s", idB, out)
		}
	})
	t.Run("then the new store serves, and the old one is refused", func(t *testing.T) {
		hb := hostService(t, url, dirB)
		defer func() { _ = hb.Stop() }()
		if hb.Store.ID() != idB {
			t.Errorf("serving %s, adopted %s", hb.Store.ID(), idB)
		}
		info, err := client.Info(context.Background())
		if err != nil || info.StoreID != idB {
			t.Errorf("info %+v, %v; want store %s", info, err, idB)
		}
		if err := hb.Stop(); err != nil {
			t.Fatal(err)
		}
		_, _, err = invoke(t, url, "serve", "--data", dirA)
		if !errors.Is(err, provider.ErrNotAdopted) || !strings.Contains(err.Error(), idB) {
			t.Errorf("serve on the replaced store: %v", err)
		}
	})
	t.Run("adopt of the adopted store again changes nothing", func(t *testing.T) {
		_, rev := adoptionRecord(t, url)
		out, _, err := invoke(t, url, "adopt", "--data", dirB, "--replace", idA)
		if err != nil || !strings.HasPrefix(out, "nothing changed: "+idB+" is already the adopted store") {
			t.Errorf("adopt: %q, %v", out, err)
		}
		if _, again := adoptionRecord(t, url); again != rev {
			t.Errorf("revision %d, want %d", again, rev)
		}
	})
}
