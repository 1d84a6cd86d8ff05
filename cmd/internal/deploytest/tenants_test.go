package deploytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// testTenants shows deploy/auth's example tenants confined to their caller
// scopes (each user's scope is its name): each sends an approval of its own
// scope and reads its receipt, live and stored, with the publisher's own
// code; neither may publish an approval on the other's scope, subscribe to
// the other's receipts or read them stored; and an approval of the other's
// scope published on its own subject is refused by the executors' gate,
// its receipt filed in the sender's own scope, the task service not called.
func testTenants(t *testing.T, ctx context.Context, spies *spyTables, url string, pw map[string]string, s *scenario.Seed,
	counts func() provider.Counts) {
	tbl := spies.table("Tenants",
		"deploy/auth's example tenants `tenant-a` and `tenant-b`: publishers of one caller scope each (the scope of their name), "+
			"each in an account of its own. A key's subjects name its scope first, so a permission on `approvals.<scope>.>`, "+
			"`receipts.<scope>.>` and `$JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.>` confines a tenant to its scope. "+
			"Each row is seen for both tenants, `<own>` being its scope and `<other>` the other's.",
		"role", "action", "subjects", "seen")
	row := func(role, action, subjects, seen string) { spies.add(tbl, role, action, subjects, seen) }
	intent := document.Identify(s.NewIntent.Envelope()).IntentID

	type tenant struct {
		name string
		c    *conn
		js   jetstream.JetStream
		seq  uint64 // its own approval's stream sequence
		rc   *testenv.Receipt
	}
	var ts []*tenant
	for _, name := range tenants {
		c := connectAs(t, url, name, pw[name])
		js, _ := jetstream.New(c.Conn)
		ts = append(ts, &tenant{name: name, c: c, js: js})
	}

	// Each sends an approval of its own scope and reads its receipt.
	for _, me := range ts {
		a, err := s.InScope(s.NewIntent, me.name)
		if err != nil {
			t.Fatal(err)
		}
		since := me.c.mark()
		w := watchReceipts(t, me.js, me.name, intent)
		sent, err := testenv.Publish(ctx, me.js, a.Envelope())
		if err != nil {
			t.Fatalf("%s could not publish an approval of its own scope: %v", me.name, err)
		}
		if want := subjects.Approval(me.name, intent); sent.Subject != want {
			t.Fatalf("%s published on %s, want %s", me.name, sent.Subject, want)
		}
		me.seq = sent.StreamSeq
		if me.rc, err = w.await(ctx, sent.StreamSeq); err != nil {
			t.Fatalf("%s could not read its receipt: %v", me.name, err)
		}
		// One intent id in two scopes is two keys: each tenant's first
		// send creates a task of its own.
		if me.rc.Outcome != document.OutcomeCreated || me.rc.Delivery.StreamSeq != sent.StreamSeq || me.rc.Scope != me.name {
			t.Fatalf("%s's receipt: %s, want its message created in its own scope", me.name, me.rc.Raw)
		}
		// The stored lookup alone: a new watch, after the receipt was stored.
		stored, err := testenv.WaitReceipt(ctx, me.js, me.name, intent, sent.StreamSeq)
		if err != nil || stored.ReceiptID != me.rc.ReceiptID {
			t.Fatalf("%s reading its stored receipt: %+v, %v; want %s", me.name, stored, err, me.rc.ReceiptID)
		}
		if me.c.violation(since, "") {
			t.Fatalf("the server refused %s something in its own scope: %v", me.name, me.c.errs[since:])
		}
		row(me.name, "publish an approval of its own scope, wait for its receipt (subscribe before publishing), read it again stored",
			"`approvals.<own>.<intent>` and its ack; subscribe `receipts.<own>.<intent>`; `$JS.API.DIRECT.GET.RECEIPTS.receipts.<own>.<intent>`", seenAllowed)
	}

	for i, me := range ts {
		other := ts[1-i]
		t.Run(me.name+" may not publish an approval of "+other.name+"'s scope", func(t *testing.T) {
			a, err := s.InScope(s.NewIntent, other.name)
			if err != nil {
				t.Fatal(err)
			}
			for _, try := range []struct{ action, subject, shown string }{
				{"publish an approval of the other's scope", subjects.Approval(other.name, intent), "`approvals.<other>.<intent>`"},
				{"publish an approval of the default scope", subjects.Approval("", intent), "`approvals.default.<intent>`"},
				{"publish onto a stream", subjects.Receipt(me.name, intent), "`receipts.<own>.<intent>`"},
				{"publish onto a stream", subjects.DeadLetter(me.name, intent), "`deadletters.<own>.<intent>`"},
			} {
				m := msg(try.subject, "")
				m.Data = a.Envelope()
				got := me.c.try(t, m)
				if !got.refused {
					t.Errorf("%s on %s: %s, want refused", me.name, try.subject, got.seen())
				}
				row(me.name, try.action, try.shown, got.seen())
			}
		})

		t.Run(me.name+"'s approval of "+other.name+"'s scope on its own subject is refused by the gate", func(t *testing.T) {
			a, err := s.InScope(s.NewIntent, other.name)
			if err != nil {
				t.Fatal(err)
			}
			before := counts()
			w := watchReceipts(t, me.js, me.name, intent)
			m := nats.NewMsg(subjects.Approval(me.name, intent))
			m.Data = a.Envelope()
			ack, err := me.js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatalf("%s publishing on its own subject: %v", me.name, err)
			}
			rc, err := w.await(ctx, ack.Sequence)
			if err != nil {
				t.Fatalf("no receipt in %s's own scope: %v", me.name, err)
			}
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckEnvelope {
				t.Fatalf("receipt %s, want rejected at %s", rc.Raw, gate.CheckEnvelope)
			}
			if after := counts(); after != before {
				t.Fatalf("the task service was called: counts %+v, were %+v", after, before)
			}
			row(me.name, "publish an approval of the other's scope on its own scope's subject",
				"`approvals.<own>.<intent>`, the request naming `<other>`",
				"rejected by the gate at `envelope`, the receipt in `receipts.<own>.<intent>`; the task service not called")
		})

		t.Run(me.name+" may not read "+other.name+"'s receipts", func(t *testing.T) {
			otherSubject := subjects.Receipt(other.name, intent)
			for _, subject := range []string{otherSubject, "receipts." + other.name + ".>", "receipts.*." + intent, "receipts.>"} {
				could := me.c.canSubscribe(t, subject)
				if could {
					t.Errorf("%s subscribed to %s", me.name, subject)
				}
				shown := map[string]string{otherSubject: "`receipts.<other>.<intent>`", "receipts." + other.name + ".>": "`receipts.<other>.>`",
					"receipts.*." + intent: "`receipts.*.<intent>`", "receipts.>": "`receipts.>`"}[subject]
				seen := seenRefused
				if could {
					seen = seenAllowed
				}
				row(me.name, "subscribe to receipts (the live subscription)", "subscribe "+shown, seen)
			}
			direct := "$JS.API.DIRECT.GET." + topology.ReceiptsStream + "."
			for _, try := range []struct {
				action, subject, body, shown string
			}{
				{"read the other's stored receipt (direct get)", direct + otherSubject, "", "`" + direct + "receipts.<other>.<intent>`"},
				{"read any scope's stored receipt (direct get, a wildcard scope)", direct + "receipts.*." + intent, "", "`" + direct + "receipts.*.<intent>`"},
				{"read any stored receipt (direct get, a wildcard subject)", direct + "receipts.>", "", "`" + direct + "receipts.>`"},
				{"read the other's stored receipt (direct get, the subject in the body)", "$JS.API.DIRECT.GET." + topology.ReceiptsStream,
					`{"last_by_subj":"` + otherSubject + `"}`, "`$JS.API.DIRECT.GET.RECEIPTS`"},
				{"read the other's stored receipt (`MSG.GET`, the subject in the body)", "$JS.API.STREAM.MSG.GET." + topology.ReceiptsStream,
					`{"last_by_subj":"` + otherSubject + `"}`, "`$JS.API.STREAM.MSG.GET.RECEIPTS`"},
			} {
				got := me.c.try(t, msg(try.subject, try.body))
				if !got.refused {
					t.Errorf("%s on %s: %s, want refused", me.name, try.subject, got.seen())
				}
				row(me.name, try.action, try.shown, got.seen())
			}
			// Its own answers stay its own: neither the publishers nor the
			// other tenant read them on an _INBOX.> of theirs.
			listeners := map[string]*conn{"publisher": connectAs(t, url, "publisher", pw["publisher"]), other.name: connectAs(t, url, other.name, pw[other.name])}
			subs := map[string]*nats.Subscription{}
			for who, c := range listeners {
				sub, err := c.SubscribeSync("_INBOX.>")
				if err != nil {
					t.Fatal(err)
				}
				_ = c.Flush()
				subs[who] = sub
			}
			mine := me.c.try(t, msg(direct+subjects.Receipt(me.name, intent), ""))
			if mine.msg == nil || mine.seen() != seenAllowed {
				t.Fatalf("%s reading its own stored receipt: %s", me.name, mine.seen())
			}
			seen := "seen by neither"
			for who, sub := range subs {
				for {
					m, err := sub.NextMsg(500 * time.Millisecond)
					if err != nil {
						break
					}
					if m.Subject == mine.msg.Subject {
						t.Errorf("the %s read %s's answer on %s", who, me.name, m.Subject)
						seen = "seen by the " + who
					}
				}
			}
			row(me.name, "read its own stored receipt while the publisher and the other tenant listen on `_INBOX.>`",
				"`"+direct+"receipts.<own>.<intent>`, answered on its inbox", seen)

			// And with the publisher's own code: no receipt of the other's
			// message, although it is stored.
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			rc, err := testenv.WaitReceipt(wctx, me.js, other.name, intent, other.seq)
			if !errors.Is(err, send.ErrNoReceipt) {
				t.Errorf("%s waiting for %s's receipt: %+v, %v; want no receipt", me.name, other.name, rc, err)
			}
		})
	}
}
