package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The adoption record: which store a deployment uses, for the life of the
// deployment. The lease says which instance serves now and ends with it; the
// record says which store may serve at all, and ends only when an operator
// replaces it (Adopt, the provider adopt command). It is the key AdoptionKey
// in the JetStream key-value bucket AdoptionBucket, a bucket of its own with
// no TTL: the lease bucket's TTL is bucket-wide (the stream's MaxAge), so
// every key in it expires, and a record that expired with the lease would
// let a new, empty store take over once the old one had been down for the
// TTL. The first start on a deployment without a record writes it; every
// start of another store is refused while it stands, whether or not the
// adopted store's instance is alive.
const (
	AdoptionBucket = "fake-task-provider-store"
	AdoptionKey    = "adopted"
	// adoptionHistory is how many records the bucket keeps: the one in
	// force and those it replaced, for audits.
	adoptionHistory = 16
)

// How a store came to be adopted (Adoption.How).
const (
	// AdoptedAtFirstStart: Serve on a deployment without a record.
	AdoptedAtFirstStart = "first start"
	// AdoptedByOperator: Adopt, or Serve with ServiceConfig.Replaces.
	AdoptedByOperator = "adopt"
	// AdoptedAgain: the serving instance found the record gone (deleted,
	// or its bucket removed) and wrote it again.
	AdoptedAgain = "recorded again"
)

// Errors of the adoption record.
var (
	// ErrNotAdopted means that the store is not the one the deployment
	// adopted: Serve refuses to start. The error is an *AdoptionError that
	// names the adopted store and says what to do.
	ErrNotAdopted = errors.New("provider: this store is not the one the deployment adopted")
	// ErrStoreReplaced means that a running service found another store
	// adopted and stopped serving (see Service.Done).
	ErrStoreReplaced = errors.New("provider: the deployment adopted another store")
	// ErrAdoptRefused means that an adoption was refused; the error says why.
	ErrAdoptRefused = errors.New("provider: adoption refused")

	errAdoptionBucket = errors.New("provider: unusable adoption bucket")
)

// Adoption is the value of the adoption record: which store the deployment
// uses, and where, when and how it was adopted.
type Adoption struct {
	StoreID string `json:"store_id"`
	Host    string `json:"host"`
	// Path is the store's data directory, absolute, when the adopting
	// process knew it.
	Path      string `json:"path,omitempty"`
	PID       int    `json:"pid"`
	AdoptedAt string `json:"adopted_at"` // RFC 3339, UTC
	How       string `json:"how"`
	// Replaces is the store this one replaced, if any.
	Replaces string `json:"replaces,omitempty"`
}

func (a Adoption) String() string {
	where := "data directory unknown"
	if a.Path != "" {
		where = "data directory " + a.Path
	}
	how := a.How
	switch a.How {
	case AdoptedAtFirstStart:
		how = "at the deployment's first start"
	case AdoptedByOperator:
		how = "by provider adopt"
	}
	if a.Replaces != "" {
		how += ", replacing " + a.Replaces
	}
	return fmt.Sprintf("store %s (adopted %s on host %s, %s, %s)", a.StoreID, a.AdoptedAt, a.Host, where, how)
}

// AdoptionError names the adopted store that made Serve refuse another.
type AdoptionError struct {
	Adopted Adoption // the record in force
	StoreID string   // the store that was refused
	Path    string   // its data directory, when known
}

func (e *AdoptionError) Error() string {
	here, dir := e.StoreID, "DIR"
	if e.Path != "" {
		here += " in " + e.Path
		dir = shellWord(e.Path)
	}
	old := e.Adopted.StoreID
	return fmt.Sprintf("%v: the deployment uses %s, a record (key %q in bucket %s) that stands until an operator replaces it. "+
		"This store, %s, is another one: serving it would create again every intent that %s knew. "+
		"Serve the data directory of %s (or a copy of it) instead. Only if %s is lost for good, replace it with "+
		"provider adopt --data %s --replace %s (dangerous: every intent %s knew is created again when its approval is resent)",
		ErrNotAdopted, e.Adopted, AdoptionKey, AdoptionBucket, here, old, old, old, dir, old, old)
}

// Unwrap makes errors.Is(err, ErrNotAdopted) hold.
func (e *AdoptionError) Unwrap() error { return ErrNotAdopted }

// ValidStoreID reports whether s has the form of a store id: "store-" and
// 16 lower-case hex digits.
func ValidStoreID(s string) bool {
	hexPart, ok := strings.CutPrefix(s, storeIDPrefix)
	if !ok || len(hexPart) != 16 {
		return false
	}
	for _, r := range hexPart {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// shellWord quotes s for a shell when it needs quoting.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// openAdoptionBucket opens the adoption bucket, creating it with replicas
// copies when it is missing, and refuses one with a TTL.
func openAdoptionBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, AdoptionBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      AdoptionBucket,
			Description: "Which fake-task-provider store this deployment uses: one key, no TTL, changed only by provider adopt.",
			History:     adoptionHistory,
			Storage:     jetstream.FileStorage,
			Replicas:    max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, AdoptionBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("provider: open the adoption bucket %s: %w", AdoptionBucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("provider: read the adoption bucket %s: %w", AdoptionBucket, err)
	}
	if st.TTL() > 0 {
		return nil, fmt.Errorf("%w: bucket %s has a TTL (%s), so the record of the adopted store would expire and any store could take over; recreate the bucket without a TTL (and adopt the store again)",
			errAdoptionBucket, AdoptionBucket, st.TTL())
	}
	return kv, nil
}

// readAdoption reads the record; found is false when there is none.
func readAdoption(ctx context.Context, kv jetstream.KeyValue) (a Adoption, rev uint64, found bool, err error) {
	e, err := kv.Get(ctx, AdoptionKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Adoption{}, 0, false, nil
	}
	if err != nil {
		return Adoption{}, 0, false, fmt.Errorf("provider: read the adoption record: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &a); err != nil || !ValidStoreID(a.StoreID) {
		return Adoption{}, 0, false, fmt.Errorf("%w: the record %q in bucket %s does not name a store (%q); no store is served until it does: look at it (nats kv get %s %s) and, if it must go, delete it and adopt the right store",
			errAdoptionBucket, AdoptionKey, AdoptionBucket, e.Value(), AdoptionBucket, AdoptionKey)
	}
	return a, e.Revision(), true, nil
}

// decideAdoption says whether a start of store id, naming replaces ("" for
// none), writes the record cur (found: it exists), or is refused.
func decideAdoption(cur Adoption, found bool, id, path, replaces string) (write bool, err error) {
	switch {
	case found && cur.StoreID == id:
		return false, nil
	case !found && replaces == "":
		return true, nil
	case !found:
		return false, fmt.Errorf("%w: no store is adopted on this deployment yet, so there is no %s to replace; adopt without naming one (a first start adopts its store by itself)",
			ErrAdoptRefused, replaces)
	case replaces == "":
		return false, &AdoptionError{Adopted: cur, StoreID: id, Path: path}
	case replaces != cur.StoreID:
		return false, fmt.Errorf("%w: %s is not the adopted store: %w", ErrAdoptRefused, replaces, &AdoptionError{Adopted: cur, StoreID: id, Path: path})
	}
	return true, nil
}

// writeAdoption writes a over the record at rev (found), or creates it.
func writeAdoption(ctx context.Context, kv jetstream.KeyValue, found bool, rev uint64, a Adoption) error {
	val, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if found {
		_, err = kv.Update(ctx, AdoptionKey, val, rev)
	} else {
		_, err = kv.Create(ctx, AdoptionKey, val)
	}
	return err
}

// raced reports whether a write lost to another writer of the record.
func raced(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// newAdoption is the record that adopts store id in path now.
func newAdoption(id, path, how, replaces string) Adoption {
	host, _ := os.Hostname()
	return Adoption{StoreID: id, Host: host, Path: path, PID: os.Getpid(),
		AdoptedAt: time.Now().UTC().Format(time.RFC3339), How: how, Replaces: replaces}
}

// adoptionPermanent reports whether a failure of the adoption check is not
// cured by a retry.
func adoptionPermanent(err error) bool {
	return errors.Is(err, ErrNotAdopted) || errors.Is(err, ErrAdoptRefused) || errors.Is(err, errAdoptionBucket) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) ||
		errors.Is(err, nats.ErrConnectionClosed)
}

// retryUntil runs f until it succeeds, fails permanently, or ctx ends. A
// failure while the server reports a permissions violation on nc is
// permanent: the role lacks a permission, and a retry gets no further.
func retryUntil(ctx context.Context, nc *nats.Conn, log *slog.Logger, what string, f func(context.Context) error) error {
	var lastLog time.Time
	for {
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(opCtx)
		cancel()
		if err == nil || adoptionPermanent(err) {
			return err
		}
		if le := nc.LastError(); errors.Is(le, nats.ErrPermissionViolation) {
			return fmt.Errorf("%w: %s: %w (the service's role needs the key %q of bucket %s: %w)",
				errAdoptionBucket, what, err, AdoptionKey, AdoptionBucket, le)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("provider: %s: gave up: %w", what, err)
		}
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Warn("cannot "+what+" yet; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// adopter is a serving instance's hold on the adoption record.
type adopter struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	replicas int
	storeID  string
	path     string
	replaces string
	// reason, when set, says why the adoption is meant
	// (ServiceConfig.ReplaceReason).
	reason string
	log    *slog.Logger

	reopen bool // confirm opens the bucket again before it reads

	// What check found, for record.
	cur   Adoption
	rev   uint64
	found bool
	write bool
}

// check reads the record and refuses a store that is not adopted (nor
// named to replace the adopted one). It touches nothing.
func (a *adopter) check(ctx context.Context) error {
	return retryUntil(ctx, a.nc, a.log, "read the adoption record", func(ctx context.Context) error {
		if _, err := a.js.AccountInfo(ctx); err != nil {
			return fmt.Errorf("provider: the adoption record needs JetStream: %w", err)
		}
		if a.kv == nil {
			kv, err := openAdoptionBucket(ctx, a.js, a.replicas)
			if err != nil {
				return err
			}
			a.kv = kv
		}
		return a.decide(ctx)
	})
}

// decide reads the record and decides whether this start writes it:
// it refuses a store that is neither adopted nor named to replace the
// adopted one.
func (a *adopter) decide(ctx context.Context) error {
	cur, rev, found, err := readAdoption(ctx, a.kv)
	if err != nil {
		return err
	}
	write, err := decideAdoption(cur, found, a.storeID, a.path, a.replaces)
	if err != nil {
		return err
	}
	a.cur, a.rev, a.found, a.write = cur, rev, found, write
	return nil
}

// record writes the record that check decided on, if any: the first start
// adopts its store, and a start naming the adopted store replaces it. Call
// it while holding the lease.
func (a *adopter) record(ctx context.Context) error {
	if !a.write {
		return nil
	}
	return retryUntil(ctx, a.nc, a.log, "write the adoption record", func(ctx context.Context) error {
		how := AdoptedAtFirstStart
		if a.found {
			how = AdoptedByOperator
		}
		rec := newAdoption(a.storeID, a.path, how, a.replaces)
		err := writeAdoption(ctx, a.kv, a.found, a.rev, rec)
		if raced(err) {
			// Someone wrote it since check: decide again on what is there.
			if derr := a.decide(ctx); derr != nil {
				return derr
			}
			if !a.write {
				return nil
			}
			return fmt.Errorf("provider: the adoption record changed while writing it: %w", err)
		}
		if err != nil {
			return fmt.Errorf("provider: write the adoption record: %w", err)
		}
		switch {
		case a.reason != "":
			what, attrs := "store adopted at the first start", []any{"store_id", a.storeID, "path", a.path}
			if a.found {
				what, attrs = "store adopted in place of the previous one", append(attrs, "replaced", a.cur.StoreID)
			}
			a.log.Info(what+", as meant: "+a.reason, attrs...)
		case a.found:
			a.log.Warn("STORE ADOPTED: this store replaces the one the deployment used; every intent the replaced store knew is created again when its approval is resent",
				"store_id", a.storeID, "replaced", a.cur.StoreID, "replaced_record", a.cur.String(), "bucket", AdoptionBucket, "key", AdoptionKey)
		default:
			a.log.Warn("store adopted at the deployment's first start: from now on any other store is refused until an operator replaces this one (provider adopt)",
				"store_id", a.storeID, "path", a.path, "bucket", AdoptionBucket, "key", AdoptionKey)
		}
		a.cur, a.found, a.write = rec, true, false
		return nil
	})
}

// confirm checks, on each renewal of the lease, that the record still
// names this store. A record that names another store stops the service
// (ErrStoreReplaced); a record that is gone is written again.
func (a *adopter) confirm(ctx context.Context) error {
	if a.reopen {
		// The last check failed: the bucket itself may be gone.
		kv, err := openAdoptionBucket(ctx, a.js, a.replicas)
		if err != nil {
			return err
		}
		a.kv, a.reopen = kv, false
	}
	cur, _, found, err := readAdoption(ctx, a.kv)
	if err != nil {
		a.reopen = !errors.Is(err, errAdoptionBucket)
		return err
	}
	if found && cur.StoreID == a.storeID {
		return nil
	}
	if found {
		return fmt.Errorf("%w: %s; this instance serves %s and stops", ErrStoreReplaced, cur, a.storeID)
	}
	rec := newAdoption(a.storeID, a.path, AdoptedAgain, "")
	if err := writeAdoption(ctx, a.kv, false, 0, rec); err != nil {
		a.reopen = true
		return fmt.Errorf("provider: write the missing adoption record again: %w", err)
	}
	a.log.Warn("the adoption record was gone (deleted, or its bucket removed) while this store served; recorded this store again",
		"store_id", a.storeID, "bucket", AdoptionBucket, "key", AdoptionKey)
	return nil
}

// AdoptConfig configures Adopt.
type AdoptConfig struct {
	// Replaces names the adopted store that the new one replaces; it must
	// be empty when none is adopted, and name the adopted one otherwise.
	Replaces string
	// DataDir is the new store's data directory, recorded with it.
	DataDir string
	// Replicas is the adoption bucket's replica count when Adopt creates
	// it; 0 = 1.
	Replicas int
	Logger   *slog.Logger // nil = slog.Default()
}

// AdoptResult says what Adopt did.
type AdoptResult struct {
	Adopted Adoption // the record in force now
	// Replaced is the record it replaced; nil when none was adopted.
	Replaced *Adoption
	// Changed is false when the store was adopted already: nothing written.
	Changed bool
}

// Adopt makes st the store of the deployment on nc, replacing the adopted
// store that cfg.Replaces names. It is the operator's act behind the
// provider adopt command, and it is dangerous: the replaced store's intents
// are not in st, so each of them is created again when its approval is
// resent. It refuses (ErrAdoptRefused, or an *AdoptionError) when
// cfg.Replaces does not name the adopted store, and while any instance of
// the service answers a PING or holds the lease, so that it never replaces
// a store that serves. A store that is adopted already is left as it is.
func Adopt(ctx context.Context, nc *nats.Conn, st *Store, cfg AdoptConfig) (AdoptResult, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return AdoptResult{}, err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return AdoptResult{}, fmt.Errorf("provider: the adoption record needs JetStream: %w", err)
	}
	kv, err := openAdoptionBucket(ctx, js, cfg.Replicas)
	if err != nil {
		return AdoptResult{}, err
	}
	cur, rev, found, err := readAdoption(ctx, kv)
	if err != nil {
		return AdoptResult{}, err
	}
	write, err := decideAdoption(cur, found, st.ID(), cfg.DataDir, cfg.Replaces)
	if err != nil {
		if !errors.Is(err, ErrAdoptRefused) {
			err = fmt.Errorf("%w: name the adopted store with --replace: %w", ErrAdoptRefused, err)
		}
		return AdoptResult{}, err
	}
	if !write {
		return AdoptResult{Adopted: cur}, nil
	}
	if err := refuseWhileServed(ctx, nc, js, st.ID()); err != nil {
		return AdoptResult{}, err
	}
	rec := newAdoption(st.ID(), cfg.DataDir, AdoptedByOperator, cfg.Replaces)
	if err := writeAdoption(ctx, kv, found, rev, rec); err != nil {
		if raced(err) {
			return AdoptResult{}, fmt.Errorf("%w: the record changed while adopting (another adopt, or a first start); nothing was written by this one: run it again: %w", ErrAdoptRefused, err)
		}
		return AdoptResult{}, fmt.Errorf("provider: write the adoption record: %w", err)
	}
	res := AdoptResult{Adopted: rec, Changed: true}
	if found {
		res.Replaced = &cur
		log.Warn("STORE ADOPTED: this store replaces the one the deployment used; every intent the replaced store knew is created again when its approval is resent",
			"store_id", rec.StoreID, "path", rec.Path, "replaced", cur.String())
	} else {
		log.Warn("store adopted: from now on any other store is refused until an operator replaces this one",
			"store_id", rec.StoreID, "path", rec.Path)
	}
	return res, nil
}

// refuseWhileServed refuses an adoption while an instance answers a PING or
// an instance of another store holds the lease.
func refuseWhileServed(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, id string) error {
	pings, err := pingOthers(nc)
	if err != nil {
		return err
	}
	for _, p := range pings {
		h := holderFromMetadata(p.ID, p.Metadata)
		return fmt.Errorf("%w: an instance serves: %s answers a micro PING; stop it first: a store is replaced only while none serves", ErrAdoptRefused, h)
	}
	lkv, err := js.KeyValue(ctx, LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("provider: open the lease bucket %s: %w", LeaseBucket, err)
	}
	e, err := lkv.Get(ctx, LeaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("provider: read the lease: %w", err)
	}
	var h LeaseHolder
	if json.Unmarshal(e.Value(), &h) == nil && h.StoreID == id {
		return nil // an earlier instance of this very store, which is open here
	}
	ttl := "its TTL"
	if st, serr := lkv.Status(ctx); serr == nil {
		ttl = st.TTL().String()
	}
	return fmt.Errorf("%w: %s holds the lease (key %q in bucket %s), last renewed %s ago: stop it first; if it died, its lease ends %s after its last renewal, and adopt may be run again then",
		ErrAdoptRefused, h, LeaseKey, LeaseBucket, time.Since(e.Created()).Round(time.Millisecond), ttl)
}
