package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// The lease: one service instance serves a deployment at a time. The serving
// instance holds the key LeaseKey in the JetStream key-value bucket
// LeaseBucket, whose entries expire LeaseTTL after they are written; it
// renews the key every TTL/3 with an update at the revision it last wrote,
// and deletes it when it stops. An instance of another store cannot take the
// key while it lives. An instance of the same store (a restart; Pebble's
// lock lets only one process open a store) takes it over at once, even from
// a process that was killed and could not delete it.
const (
	LeaseBucket = "fake-task-provider-lease"
	LeaseKey    = "lease"
	// DefaultLeaseTTL is the lease's lifetime without renewal when Serve
	// creates the bucket. An existing bucket keeps its own TTL.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultStartTimeout bounds how long Serve waits for NATS and
	// JetStream to take the lease.
	DefaultStartTimeout = 30 * time.Second
)

// Errors of the lease.
var (
	// ErrAnotherInstance means that another service instance serves: Serve
	// refuses to start. The error is an *InstanceError that names it.
	ErrAnotherInstance = errors.New("provider: another task service instance serves")
	// ErrLeaseLost means that a running service found its lease held by
	// another instance and stopped serving (see Service.Done).
	ErrLeaseLost = errors.New("provider: lease lost")
)

// LeaseHolder is the value of the lease key and the identity that the
// service's micro metadata carries: which store, which instance, where.
type LeaseHolder struct {
	StoreID  string `json:"store_id"`
	Instance string `json:"instance"` // the micro service instance id
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Since    string `json:"since,omitempty"` // when it took the lease, RFC 3339
}

func (h LeaseHolder) String() string {
	store := h.StoreID
	if store == "" {
		store = "of unknown id (a service without store ids)"
	}
	s := fmt.Sprintf("store %s (instance %s on host %s, pid %d", store, h.Instance, h.Host, h.PID)
	if h.Since != "" {
		s += ", serving since " + h.Since
	}
	return s + ")"
}

// InstanceError names the instance that made Serve refuse to start.
type InstanceError struct {
	Holder LeaseHolder
	// Via is how it was found: "lease" (it holds the lease) or "ping" (it
	// answered a micro PING).
	Via string
	// SameStore is true when it serves a store with this store's id: a
	// copy of the data directory, since only one process can open one.
	SameStore bool
	// Renewed is when the holder last wrote the lease (server time); TTL
	// is how long the lease lives after that. Set for Via "lease".
	Renewed time.Time
	TTL     time.Duration
}

func (e *InstanceError) Error() string {
	what := "answers a micro PING"
	if e.Via == "lease" {
		what = fmt.Sprintf("holds the lease (key %q in bucket %s), last renewed %s ago; it ends %s after its last renewal if the instance dies",
			LeaseKey, LeaseBucket, time.Since(e.Renewed).Round(time.Millisecond), e.TTL)
	}
	advice := "two stores must never both answer, so this instance does not start; stop that instance, or serve its data directory instead"
	if e.SameStore {
		advice = "a store is served by one process, and this one is open here: is the data directory a copy? This instance does not start"
	}
	return fmt.Sprintf("%v: %s %s; %s", ErrAnotherInstance, e.Holder, what, advice)
}

// Unwrap makes errors.Is(err, ErrAnotherInstance) hold.
func (e *InstanceError) Unwrap() error { return ErrAnotherInstance }

// pingWait bounds the wait for the first answer to the PING once the
// server has said that some instance listens.
const pingWait = time.Second

// pingOthers sends a micro PING to every instance of the service and
// returns those that answer. It returns at once when none listens (the
// server's no-responders status).
func pingOthers(nc *nats.Conn) ([]micro.Ping, error) {
	subject, err := micro.ControlSubject(micro.PingVerb, ServiceName, "")
	if err != nil {
		return nil, err
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("provider: ping other instances: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("provider: ping other instances: %w", err)
	}
	var out []micro.Ping
	wait := pingWait
	for {
		msg, err := sub.NextMsg(wait)
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("provider: ping other instances: %w", err)
		}
		if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
			return out, nil // no responders
		}
		var p micro.Ping
		if err := json.Unmarshal(msg.Data, &p); err == nil {
			out = append(out, p)
		}
		// Other instances answer within a moment of the first.
		wait = 100 * time.Millisecond
	}
}

// refuseIfAnswered turns the PING answers into an *InstanceError.
func refuseIfAnswered(pings []micro.Ping, storeID string) error {
	for _, p := range pings {
		h := holderFromMetadata(p.ID, p.Metadata)
		return &InstanceError{Holder: h, Via: "ping", SameStore: h.StoreID == storeID}
	}
	return nil
}

func holderFromMetadata(id string, md map[string]string) LeaseHolder {
	h := LeaseHolder{Instance: id, StoreID: md["store_id"], Host: md["host"], Since: md["since"]}
	_, _ = fmt.Sscan(md["pid"], &h.PID)
	return h
}

// lease is the serving instance's hold on the lease key.
type lease struct {
	nc    *nats.Conn
	kv    jetstream.KeyValue
	ttl   time.Duration
	me    LeaseHolder
	value []byte
	log   *slog.Logger
	kick  chan struct{} // asks the renewal loop to renew now
	// adopt, when set, is checked before each renewal: a lease is renewed
	// only while the adoption record names this store.
	adopt *adopter

	mu         sync.Mutex
	rev        uint64
	validUntil time.Time // on the monotonic clock; creates are refused after it
	reconnects uint64    // the connection's reconnect count when last confirmed
	lapsed     bool      // creates are being refused; logged once
}

// permanent reports whether taking the lease failed in a way a retry does
// not cure.
func permanent(err error) bool {
	var ie *InstanceError
	return errors.As(err, &ie) ||
		errors.Is(err, errLeaseBucket) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) ||
		errors.Is(err, nats.ErrConnectionClosed)
}

var errLeaseBucket = errors.New("provider: unusable lease bucket")

// takeLease takes the lease for me, retrying transient failures until ctx
// ends. It refuses with an *InstanceError when another store holds it.
func takeLease(ctx context.Context, nc *nats.Conn, me LeaseHolder, cfg ServiceConfig, log *slog.Logger) (*lease, error) {
	value, err := json.Marshal(me)
	if err != nil {
		return nil, err
	}
	l := &lease{nc: nc, me: me, value: value, log: log, kick: make(chan struct{}, 1)}
	var lastLog time.Time
	for {
		err := l.take(ctx, cfg)
		if err == nil {
			return l, nil
		}
		if permanent(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("provider: take the lease: gave up: %w", err)
		}
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Warn("cannot take the lease yet; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// opTimeout bounds one key-value call.
func (l *lease) opTimeout() time.Duration {
	if l.ttl > 0 && l.ttl/3 < 5*time.Second {
		return l.ttl / 3
	}
	return 5 * time.Second
}

func (l *lease) take(ctx context.Context, cfg ServiceConfig) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	js, err := jetstream.New(l.nc)
	if err != nil {
		return err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("provider: the lease needs JetStream: %w", err)
	}
	if l.kv == nil {
		kv, err := js.KeyValue(ctx, LeaseBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:      LeaseBucket,
				Description: "Which fake-task-provider instance serves: one key, renewed by the serving instance.",
				TTL:         cfg.LeaseTTL,
				Storage:     jetstream.FileStorage,
				Replicas:    cfg.LeaseReplicas,
			})
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(ctx, LeaseBucket)
			}
		}
		if err != nil {
			return fmt.Errorf("provider: open the lease bucket %s: %w", LeaseBucket, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return fmt.Errorf("provider: read the lease bucket %s: %w", LeaseBucket, err)
		}
		if st.TTL() <= 0 {
			return fmt.Errorf("%w: bucket %s has no TTL, so a lease would never end; delete the bucket and start again", errLeaseBucket, LeaseBucket)
		}
		l.kv, l.ttl = kv, st.TTL()
	}
	for range 5 {
		rc := l.nc.Stats().Reconnects
		e, err := l.kv.Get(ctx, LeaseKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			sent := time.Now()
			rev, err := l.kv.Create(ctx, LeaseKey, l.value)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			if err != nil {
				return fmt.Errorf("provider: create the lease: %w", err)
			}
			l.confirm(rev, sent, rc)
			return nil
		}
		if err != nil {
			return fmt.Errorf("provider: read the lease: %w", err)
		}
		var h LeaseHolder
		if err := json.Unmarshal(e.Value(), &h); err != nil || h.StoreID == "" {
			return &InstanceError{Holder: LeaseHolder{Instance: fmt.Sprintf("unreadable lease value %q", e.Value())},
				Via: "lease", Renewed: e.Created(), TTL: l.ttl}
		}
		if h.StoreID != l.me.StoreID {
			return &InstanceError{Holder: h, Via: "lease", Renewed: e.Created(), TTL: l.ttl}
		}
		// An earlier instance of this store: it cannot be running, since
		// this process holds the store open. Take over at once.
		sent := time.Now()
		rev, err := l.kv.Update(ctx, LeaseKey, l.value, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return fmt.Errorf("provider: take over the lease: %w", err)
		}
		l.log.Info("took over the lease from an earlier instance of this store",
			"previous_instance", h.Instance, "previous_host", h.Host, "previous_pid", h.PID,
			"last_renewed", e.Created().UTC().Format(time.RFC3339Nano))
		l.confirm(rev, sent, rc)
		return nil
	}
	return errors.New("provider: the lease changed hands five times while taking it")
}

// confirm records a write of the lease at rev that was sent at sent: the
// key lives on the server until at least sent+TTL, so the lease is counted
// held until a tenth of the TTL before that.
func (l *lease) confirm(rev uint64, sent time.Time, reconnects uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rev = rev
	l.validUntil = sent.Add(l.ttl - l.ttl/10)
	l.reconnects = reconnects
	if l.lapsed {
		l.lapsed = false
		l.log.Warn("lease renewed; create calls are answered again", "revision", rev)
	}
}

// held reports whether creates may be answered: the lease was confirmed
// less than its TTL ago (less a margin), and not before a reconnect since
// (a connection that was away must renew before it answers).
func (l *lease) held() bool {
	rc := l.nc.Stats().Reconnects
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := time.Now().Before(l.validUntil) && rc == l.reconnects
	if !ok {
		if !l.lapsed {
			l.lapsed = true
			expired := !time.Now().Before(l.validUntil)
			level := slog.LevelWarn
			if expired {
				level = slog.LevelError
			}
			l.log.Log(context.Background(), level, "lease not confirmed (not renewed in time, or reconnected since the last renewal); refusing create calls until it is renewed",
				"expired", expired, "reconnected", rc != l.reconnects)
		}
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return ok
}

// errRenewSoon asks the loop to renew again after a short wait.
var errRenewSoon = errors.New("provider: lease renewal to be repeated")

// renew writes the lease at the revision last written.
func (l *lease) renew(parent context.Context) error {
	ctx, cancel := context.WithTimeout(parent, l.opTimeout())
	defer cancel()
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	rc := l.nc.Stats().Reconnects
	sent := time.Now()
	newRev, err := l.kv.Update(ctx, LeaseKey, l.value, rev)
	if err == nil {
		l.confirm(newRev, sent, rc)
		return l.checkAdoption(parent)
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("provider: renew the lease: %w", err)
	}
	// The key expired, or another instance wrote it, or an earlier renewal
	// of this one was applied but its reply lost.
	e, err := l.kv.Get(ctx, LeaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		sent := time.Now()
		newRev, err := l.kv.Create(ctx, LeaseKey, l.value)
		if err != nil {
			return fmt.Errorf("provider: take the expired lease again: %w", err)
		}
		l.log.Warn("the lease had expired (NATS or JetStream unreachable for longer than its TTL) and no other instance took it; took it again",
			"ttl", l.ttl)
		l.confirm(newRev, sent, rc)
		return l.checkAdoption(parent)
	}
	if err != nil {
		return fmt.Errorf("provider: read the lease: %w", err)
	}
	var h LeaseHolder
	if jerr := json.Unmarshal(e.Value(), &h); jerr == nil && h.Instance == l.me.Instance {
		l.mu.Lock()
		l.rev = e.Revision()
		l.mu.Unlock()
		return errRenewSoon
	}
	// Lost: nothing more is answered under this lease. If that is because
	// the deployment adopted another store, say so.
	l.mu.Lock()
	l.validUntil = time.Time{}
	l.mu.Unlock()
	if err := l.checkAdoption(parent); errors.Is(err, ErrStoreReplaced) {
		return err
	}
	return fmt.Errorf("%w: %s now holds it", ErrLeaseLost, h)
}

// checkAdoption reads the adoption record after a renewal: ErrStoreReplaced
// when the deployment adopted another store, which ends serving. Any other
// failure to read it is logged and left to the next renewal: it never holds
// up the lease, whose renewal decides whether creates are answered, so a
// slow or failed read of the record cannot make the service answer 503.
// (Another store is refused at its own start; this check is the second
// guard, for a replacement made while this instance was cut off.)
func (l *lease) checkAdoption(parent context.Context) error {
	if l.adopt == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(parent, l.opTimeout())
	defer cancel()
	err := l.adopt.confirm(ctx)
	if err == nil || errors.Is(err, ErrStoreReplaced) {
		return err
	}
	l.log.Warn("could not read the adoption record after renewing the lease; will read it at the next renewal",
		"bucket", AdoptionBucket, "err", err)
	return nil
}

// run renews the lease every TTL/3 until ctx ends. When another instance
// holds the lease, or the deployment adopted another store, it calls lost
// and returns.
func (l *lease) run(ctx context.Context, lost func(error)) {
	interval := l.ttl / 3
	retry := max(l.ttl/20, 50*time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
		err := l.renew(ctx)
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrStoreReplaced) {
			lost(err)
			return
		}
		next := interval
		switch {
		case err == nil:
			if failing {
				l.log.Info("lease renewal works again")
			}
			failing = false
		case errors.Is(err, errRenewSoon):
			next = 0
		case ctx.Err() != nil:
			return
		default:
			if !failing {
				l.log.Warn("lease renewal failed; retrying", "err", err, "retry_in", retry)
			}
			failing = true
			next = retry
		}
		t.Reset(next)
	}
}

// release deletes the key if this instance still holds it, so that another
// store's instance may start at once.
func (l *lease) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout())
	defer cancel()
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if err := l.kv.Delete(ctx, LeaseKey, jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("provider: release the lease: %w", err)
	}
	return nil
}
