package console_test

import (
	"crypto/ed25519"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/send"
)

// TestSignedApprovals: with a key, the console's approvals pass an executor
// that accepts only signed approvals from trusted reviewers.
func TestSignedApprovals(t *testing.T) {
	env := testenv.Start(t)
	key := scenario.TestKey()
	kr, err := sign.NewKeyring(sign.ApproverFor("reviewer-1", key.Public()))
	if err != nil {
		t.Fatal(err)
	}
	env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr}})
	// The console signs on the clock the executor judges expiry by, not on
	// the test clock that starts at the seed's approval time: that time
	// plus the approval's lifetime is long past on a later day.
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) {
		c.Key, c.Clock = key, func() time.Time { return time.Now().UTC() }
	})
	p := s.get(t, press(t, s, approveForm("reviewer-1"))+"?wait=1")
	p.expect(t, http.StatusOK, `data-state="created"`)
	if c := env.Counts(); c.CreatesExecuted != 1 {
		t.Fatalf("counters %+v, want one create", c)
	}
}

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// approvalsStored is how many messages the APPROVALS stream holds.
func approvalsStored(t *testing.T, env *testenv.Env) uint64 {
	t.Helper()
	return testenv.StreamState(t, env.JS, "APPROVALS").Msgs
}

// TestExpiredApprovalIsNotSent: the review page shows a kept approval's
// not_after; once it has passed, the console says so in plain words and
// refuses to send it, publishing nothing, until it is discarded and made
// again.
func TestExpiredApprovalIsNotSent(t *testing.T) {
	env := testenv.Start(t)
	clk := &clock{now: scenario.ApprovedAt}
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) {
		c.Key, c.Lifetime, c.Clock = scenario.TestKey(), time.Hour, clk.Now
	})
	first := press(t, s, approveForm("reviewer-1"))
	p := s.get(t, "/c/notify-checks")
	p.expect(t, http.StatusOK, `<p id="not-after">It is valid until <time datetime="2026-11-27T11:00:00Z">2026-11-27T11:00:00Z</time> (<code>not_after</code>)`)
	p.lacks(t, `id="expired"`, `id="discard"`)
	stored := approvalsStored(t, env)

	clk.Add(time.Hour + time.Second)
	p = s.get(t, "/c/notify-checks")
	p.expect(t, http.StatusOK, `<p id="not-after">It expired at <time datetime="2026-11-27T11:00:00Z">`,
		`<div class="notice warn" id="expired" role="note">`, "This approval expired at 2026-11-27T11:00:00Z.",
		"the console will not send it", `id="discard"`)
	second := press(t, s, url.Values{})
	if second == first {
		t.Fatal("the second press went to the first send's page")
	}
	p = s.get(t, second)
	p.expect(t, http.StatusOK, `data-state="refused"`,
		"<strong>rejected at expiry:</strong> the approval is no longer valid.", "<strong>Nothing was sent.</strong>",
		"Discard this approval and approve again",
		"the approval expired at 2026-11-27T11:00:00Z")
	if n := approvalsStored(t, env); n != stored {
		t.Fatalf("the APPROVALS stream holds %d messages after the refused send, want %d", n, stored)
	}

	// Discarded and approved again: a new approval, valid again.
	s.post(t, "/c/notify-checks/discard", url.Values{})
	press(t, s, approveForm("reviewer-1"))
	s.get(t, "/c/notify-checks").expect(t, http.StatusOK, `It is valid until <time datetime="2026-11-27T12:00:01Z">`)
	if n := approvalsStored(t, env); n != stored+1 {
		t.Fatalf("the APPROVALS stream holds %d messages, want %d", n, stored+1)
	}
}

// TestTrustedApproversCheckedBeforeSending: with the trusted approvers, the
// console runs the signature and expiry checks before it publishes, and
// refuses what an executor would refuse.
func TestTrustedApproversCheckedBeforeSending(t *testing.T) {
	key := scenario.TestKey()
	other, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	trust := func(t *testing.T, name string, pub ed25519.PublicKey) *send.TrustedApprovers {
		tr, err := send.NewTrustedApprovers(send.Approver{Name: name, PublicKey: pub})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for _, tc := range []struct {
		name     string
		edit     func(*console.Config)
		want     string
		advances time.Duration
	}{
		{"unsigned", func(c *console.Config) { c.Trusted = trust(t, "reviewer-1", key.Public()) },
			"the approval is not signed", 0},
		{"an untrusted key", func(c *console.Config) {
			c.Key, c.Trusted = key, trust(t, "reviewer-1", other.Public())
		}, "which is not among the trusted approvers", 0},
		{"the key of another name", func(c *console.Config) {
			c.Key, c.Trusted = key, trust(t, "reviewer-2", key.Public())
		}, "approved_by says &#34;reviewer-1&#34;, but the signature is by trusted approver &#34;reviewer-2&#34;", 0},
		{"expired", func(c *console.Config) {
			c.Key, c.Lifetime, c.Trusted = key, time.Minute, trust(t, "reviewer-1", key.Public())
		}, "the approval expired at", 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t)
			clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
			s := startConsole(t, env, copyFixtures(t), func(c *console.Config) {
				c.Clock = clk.Now
				tc.edit(c)
			})
			stored := approvalsStored(t, env)
			if tc.advances > 0 {
				// Sent while valid; refused once expired.
				press(t, s, approveForm("reviewer-1"))
				stored++
				clk.Add(tc.advances)
			}
			check := "signature"
			if tc.advances > 0 {
				check = "expiry"
			}
			p := s.get(t, press(t, s, approveForm("reviewer-1")))
			p.expect(t, http.StatusOK, `data-state="refused"`, "<strong>rejected at "+check+":</strong>",
				"<strong>Nothing was sent.</strong>", tc.want)
			if n := approvalsStored(t, env); n != stored {
				t.Fatalf("the APPROVALS stream holds %d messages, want %d", n, stored)
			}
		})
	}

	// Trusted, signed in the key's name, in time: sent, and created.
	env := testenv.Start(t)
	kr, err := sign.NewKeyring(sign.ApproverFor("reviewer-1", key.Public()))
	if err != nil {
		t.Fatal(err)
	}
	env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr}})
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) {
		c.Key, c.Trusted, c.Clock = key, trust(t, "reviewer-1", key.Public()), func() time.Time { return time.Now().UTC() }
	})
	s.get(t, press(t, s, approveForm("reviewer-1"))+"?wait=1").expect(t, http.StatusOK, `data-state="created"`)
}

// TestKeyOwnerName: a console that knows whose key it signs with starts the
// form with that name and makes approvals in no other name, saying whose
// key it is.
func TestKeyOwnerName(t *testing.T) {
	env := testenv.Start(t)
	key := scenario.TestKey()
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) {
		c.Key, c.KeyOwner, c.By = key, "reviewer-1", ""
	})
	s.get(t, "/c/notify-checks").expect(t, http.StatusOK, `value="reviewer-1" required maxlength="256" autocomplete="name" readonly`,
		"the trusted approvers give the signing key <code>"+key.ID+"</code> this name")
	p := s.post(t, "/c/notify-checks/send", approveForm("mallory"))
	p.expect(t, http.StatusUnprocessableEntity,
		"this console signs with the key of &#34;reviewer-1&#34; (key "+key.ID+"), so an approval it makes must name &#34;reviewer-1&#34;")
	s.get(t, "/c/notify-checks/approval.json").expect(t, http.StatusNotFound)
	press(t, s, approveForm("reviewer-1"))
	s.get(t, "/c/notify-checks/approval.json").expect(t, http.StatusOK, `"approved_by": "reviewer-1"`, `"key_id": "`+key.ID+`"`)

	if _, err := console.New(console.Config{Dir: s.Dir, JetStream: env.JS, KeyOwner: "x", AllowedHosts: []string{"localhost"}}); err == nil {
		t.Error("New accepted a KeyOwner without a Key")
	}
}

func TestARequestForAScopeTheApproverIsNotTrustedForIsNotSent(t *testing.T) {
	key := scenario.TestKey()
	env := testenv.Start(t)
	// The console's folder, with the notify-checks request in team-a, and
	// the form that approves it.
	scoped := func(t *testing.T) (string, url.Values) {
		dir := copyFixtures(t)
		b := editJSON(t, filepath.Join(dir, "notify-checks.request.json"), func(m map[string]any) { m["scope"] = "team-a" })
		digest, err := canon.Digest(b)
		if err != nil {
			t.Fatal(err)
		}
		form := approveForm("reviewer-1")
		form.Set("request_digest", digest)
		return dir, form
	}
	for _, c := range []struct {
		name   string
		scopes []string
		state  string
	}{
		{"an approver trusted for default only is refused at scope, and nothing is sent", nil, "refused"},
		{"an approver trusted for team-a sends it", []string{"team-a"}, "pending"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := send.NewTrustedApprovers(send.Approver{Name: "reviewer-1", PublicKey: key.Public(), Scopes: c.scopes})
			if err != nil {
				t.Fatal(err)
			}
			dir, form := scoped(t)
			s := startConsole(t, env, dir, func(cf *console.Config) {
				cf.Key, cf.Trusted, cf.Clock = key, tr, func() time.Time { return time.Now().UTC() }
			})
			stored := approvalsStored(t, env)
			p := s.get(t, press(t, s, form))
			if c.state == "refused" {
				p.expect(t, http.StatusOK, `data-state="refused"`, "<strong>rejected at scope:</strong>",
					"the approver is not trusted to approve requests for this request", "<strong>Nothing was sent.</strong>")
				if n := approvalsStored(t, env); n != stored {
					t.Fatalf("the APPROVALS stream holds %d messages, want %d", n, stored)
				}
				return
			}
			p.lacks(t, `data-state="refused"`)
			if n := approvalsStored(t, env); n != stored+1 {
				t.Fatalf("the APPROVALS stream holds %d messages, want %d", n, stored+1)
			}
		})
	}
}
