package topology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sendtwice/sendtwice/internal/natsconn"
)

// This file keeps the record of what provisioning applied, so that what
// reads the streams later (verify, an executor bound with --no-provision)
// judges them against what was provisioned, not against what they say of
// themselves now: someone who lowers a stream's MaxAge, or rewrites the
// executors' consumer, changes the live configuration but not the record.
//
// The record is one key of a key-value bucket of its own, RecordBucket,
// kept without a TTL: only the provisioning role may write it, the
// executors and the operator may read it (deploy/auth). Its value holds
// the configuration of each of the three streams and of the consumer as
// the server returned it when provisioning applied it, so that the
// comparison with the live configuration is exact; one key, written at
// once, so that no reader sees half of a provisioning.

// RecordBucket is the key-value bucket that records what provisioning
// applied; RecordKey is its key.
const (
	RecordBucket = "sendtwice-topology"
	RecordKey    = "provisioned"
	// recordHistory keeps the last provisionings, for whoever wants to see
	// what changed and when.
	recordHistory = 16
)

// serverMetaPrefix marks the metadata the server keeps on every stream and
// consumer (its version, the API level); it changes with an upgrade, so it
// is never compared.
const serverMetaPrefix = "_nats."

// ErrNoRecord says that no record of what was provisioned exists: the
// topology was provisioned by an older version, or the record was deleted.
var ErrNoRecord = errors.New("topology: no record of what provisioning applied")

// Provisioned is what provisioning applied: the configuration of each
// stream and of the consumer.
type Provisioned struct {
	// At is when provisioning applied it (zero when not recorded).
	At time.Time `json:"provisioned_at"`
	// Streams are the three streams' configurations, by name.
	Streams map[string]jetstream.StreamConfig `json:"streams"`
	// Consumer is the executors' consumer's configuration.
	Consumer jetstream.ConsumerConfig `json:"consumer"`
	// Recorded says the configurations are the server's, as recorded when
	// provisioning applied them, so that every field compares. Without it
	// they are what topology makes of a Config (Intended), and only the
	// fields topology sets compare.
	Recorded bool `json:"-"`
}

// StreamNames are the streams provisioning makes, in order.
var StreamNames = []string{ApprovalsStream, ReceiptsStream, DeadLetterStream}

// Intended is what topology makes of c: what provisioning with c applies,
// before the server fills in its defaults.
func Intended(c Config) Provisioned {
	return Provisioned{
		Streams: map[string]jetstream.StreamConfig{
			ApprovalsStream:  ApprovalsConfig(c),
			ReceiptsStream:   ReceiptsConfig(c),
			DeadLetterStream: DeadLetterConfig(c),
		},
		Consumer: ConsumerConfig(c),
	}
}

// RecordBucketConfig is the bucket that holds the record: file storage,
// no TTL, replicated like the streams.
func RecordBucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      RecordBucket,
		Description: "what provisioning applied to the streams and the executors' consumer; written only by provisioning",
		History:     recordHistory,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
}

// record writes p as the record of what was provisioned.
func record(ctx context.Context, js jetstream.JetStream, replicas int, p Provisioned) error {
	return putRecord(ctx, js, true, replicas, RecordKey, "what was provisioned", p)
}

// putRecord writes v at key of the record bucket, creating or updating
// the bucket when create is set; what says in errors what v is.
func putRecord(ctx context.Context, js jetstream.JetStream, create bool, replicas int, key, what string, v any) error {
	value, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("topology: encoding the record of %s: %w", what, err)
	}
	kv, err := natsconn.Bucket(ctx, js, RecordBucketConfig(replicas), create)
	if err != nil {
		return fmt.Errorf("topology: recording %s: %w", what, err)
	}
	if _, err := kv.Put(ctx, key, value); err != nil {
		return fmt.Errorf("topology: recording %s in bucket %s: %w", what, RecordBucket, err)
	}
	return nil
}

// getRecord reads key of the record bucket. It returns an error wrapping
// missing when there is no bucket or no key; what says in errors what the
// record is of.
func getRecord(ctx context.Context, js jetstream.JetStream, key, what string, missing error) ([]byte, error) {
	kv, err := js.KeyValue(ctx, RecordBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w (no bucket %s)", missing, RecordBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: reading the record of %s (bucket %s): %w", what, RecordBucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w (bucket %s has no key %s)", missing, RecordBucket, key)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: reading the record of %s (bucket %s): %w", what, RecordBucket, err)
	}
	return e.Value(), nil
}

// ReadRecord reads the record of what was provisioned. It returns an error
// wrapping ErrNoRecord when there is none, and says why when the record
// does not decode.
func ReadRecord(ctx context.Context, js jetstream.JetStream) (Provisioned, error) {
	value, err := getRecord(ctx, js, RecordKey, "what was provisioned", ErrNoRecord)
	if err != nil {
		return Provisioned{}, err
	}
	return decodeRecord(value)
}

// decodeRecord decodes a record and refuses one that lacks a stream or
// the consumer.
func decodeRecord(value []byte) (Provisioned, error) {
	var p Provisioned
	if err := json.Unmarshal(value, &p); err != nil {
		return Provisioned{}, fmt.Errorf("topology: the record in bucket %s, key %s, does not decode: %w", RecordBucket, RecordKey, err)
	}
	for _, name := range StreamNames {
		if p.Streams[name].Name != name {
			return Provisioned{}, fmt.Errorf("topology: the record in bucket %s, key %s, has no stream %s", RecordBucket, RecordKey, name)
		}
	}
	if p.Consumer.Durable != Consumer {
		return Provisioned{}, fmt.Errorf("topology: the record in bucket %s, key %s, has no consumer %s", RecordBucket, RecordKey, Consumer)
	}
	p.Recorded = true
	return p, nil
}

// Difference is one field in which a live configuration differs from what
// was provisioned.
type Difference struct {
	// Object is "stream APPROVALS" or "consumer executor".
	Object string `json:"object"`
	// Field is the field's name in the JetStream API ("max_age",
	// "metadata.sendtwice.max_deliver"); empty when the object is missing.
	Field    string `json:"field,omitempty"`
	Expected string `json:"expected"`
	Found    string `json:"found"`
}

func (d Difference) String() string {
	if d.Field == "" {
		return fmt.Sprintf("%s: expected %s, found %s", d.Object, d.Expected, d.Found)
	}
	return fmt.Sprintf("%s: %s: expected %s, found %s", d.Object, d.Field, d.Expected, d.Found)
}

// Describe lists the differences on one line each, for an error or a log.
func Describe(ds []Difference) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, "; ")
}

// Missing is the difference of an object that does not exist.
func Missing(object string) Difference {
	return Difference{Object: object, Expected: "to exist", Found: "none"}
}

// StreamObject and ConsumerObject name what a Difference is about.
func StreamObject(name string) string { return "stream " + name }

// ConsumerObject names the executors' consumer.
const ConsumerObject = "consumer " + Consumer

// DiffStream lists how the stream configuration found differs from want.
// With recorded (want is as the server returned it), every field
// compares; otherwise (want is what topology makes, Intended) the fields
// topology sets do, but for the replicas. The server's own metadata
// (_nats.*) never compares.
func DiffStream(want, found jetstream.StreamConfig, recorded bool) []Difference {
	return diff(StreamObject(want.Name), reflect.ValueOf(want), reflect.ValueOf(found), recorded)
}

// DiffConsumer is DiffStream for the executors' consumer.
func DiffConsumer(want, found jetstream.ConsumerConfig, recorded bool) []Difference {
	return diff(ConsumerObject, reflect.ValueOf(want), reflect.ValueOf(found), recorded)
}

// Diff lists how the live configurations differ from p: each stream of
// StreamNames and the consumer; a nil found means the object is missing.
func (p Provisioned) Diff(streams map[string]*jetstream.StreamConfig, consumer *jetstream.ConsumerConfig) []Difference {
	var out []Difference
	for _, name := range StreamNames {
		f := streams[name]
		if f == nil {
			out = append(out, Missing(StreamObject(name)))
			continue
		}
		out = append(out, DiffStream(p.Streams[name], *f, p.Recorded)...)
	}
	if consumer == nil {
		return append(out, Missing(ConsumerObject))
	}
	return append(out, DiffConsumer(p.Consumer, *consumer, p.Recorded)...)
}

// compareZero are the fields that compare even when topology leaves them
// at their zero value, which is then a choice: file storage, limits
// retention, discarding old messages, explicit acks, delivering all, no
// back-off.
var compareZero = map[string]bool{
	"retention": true, "discard": true, "storage": true,
	"ack_policy": true, "deliver_policy": true, "backoff": true,
}

func diff(object string, want, found reflect.Value, recorded bool) []Difference {
	var out []Difference
	t := want.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		w, g := want.Field(i), found.Field(i)
		if name == "metadata" {
			out = append(out, diffMetadata(object, w.Interface().(map[string]string), g.Interface().(map[string]string), recorded)...)
			continue
		}
		if !recorded && (w.IsZero() && !compareZero[name] || name == "num_replicas") {
			// Replicas are the deployment's choice (--replicas), not a
			// default topology can know.
			continue
		}
		if equal(w, g) {
			continue
		}
		out = append(out, Difference{Object: object, Field: name, Expected: show(w), Found: show(g)})
	}
	return out
}

// equal compares two field values; an empty slice or map equals a nil one.
func equal(a, b reflect.Value) bool {
	if (a.Kind() == reflect.Slice || a.Kind() == reflect.Map) && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func diffMetadata(object string, want, found map[string]string, recorded bool) []Difference {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	if recorded {
		for k := range found {
			keys[k] = true
		}
	}
	var out []Difference
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if strings.HasPrefix(k, serverMetaPrefix) {
			continue
		}
		w, wok := want[k]
		g, gok := found[k]
		if wok == gok && w == g {
			continue
		}
		d := Difference{Object: object, Field: "metadata." + k, Expected: "none", Found: "none"}
		if wok {
			d.Expected = fmt.Sprintf("%q", w)
		}
		if gok {
			d.Found = fmt.Sprintf("%q", g)
		}
		out = append(out, d)
	}
	return out
}

// show prints a field's value for a Difference.
func show(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "none"
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return "none"
		}
		if _, durations := v.Interface().([]time.Duration); durations {
			return fmt.Sprintf("%v", v.Interface())
		}
		return showJSON(v)
	case reflect.String:
		return fmt.Sprintf("%q", v.String())
	case reflect.Struct:
		return showJSON(v)
	}
	return fmt.Sprintf("%v", v.Interface())
}

func showJSON(v reflect.Value) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.Interface()); err != nil {
		return fmt.Sprintf("%+v", v.Interface())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// TaskServiceKey is the key of RecordBucket that records which task
// service the executors call, and where: serve writes it at start, so
// that status and verify, run without task service flags, read and audit
// the service the pipeline uses.
const TaskServiceKey = "task-service"

// ErrNoTaskService says that no executor recorded its task service.
var ErrNoTaskService = errors.New("topology: no record of the executors' task service")

// TaskService is the record of the task service the executors call: its
// kind and the settings that say where it is. It never holds a secret (a
// password, an API key): a reader brings its own.
type TaskService struct {
	// Kind is the --task-service value: fake, caldav, redmine.
	Kind string `json:"kind"`
	// Name names the service as the executors' log does ("CalDAV
	// collection https://…/").
	Name string `json:"name,omitempty"`
	// Destinations are the CalDAV collections' URLs by destination name
	// ("default" for --caldav-url), without a user or password in them.
	Destinations map[string]string `json:"destinations,omitempty"`
	// CalDAVUser is the user the executors log in as (no password).
	CalDAVUser string `json:"caldav_user,omitempty"`
	// RedmineURL, RedmineProject and RedmineField say where Redmine's
	// issues are and which custom field carries their keys.
	RedmineURL     string `json:"redmine_url,omitempty"`
	RedmineProject string `json:"redmine_project,omitempty"`
	RedmineField   string `json:"redmine_field,omitempty"`
	// By is the executor that wrote the record, and At when.
	By string    `json:"recorded_by,omitempty"`
	At time.Time `json:"recorded_at"`
}

// RecordTaskService writes ts as the executors' task service. With create
// it creates or updates the bucket (replicated like the streams), as
// provisioning does; without (serve --no-provision) it writes to the
// bucket provisioning made, and fails when there is none or the writer
// may not write.
func RecordTaskService(ctx context.Context, js jetstream.JetStream, create bool, replicas int, ts TaskService) error {
	return putRecord(ctx, js, create, replicas, TaskServiceKey, "the task service", ts)
}

// ReadTaskService reads the record of the executors' task service. It
// returns an error wrapping ErrNoTaskService when there is none.
func ReadTaskService(ctx context.Context, js jetstream.JetStream) (TaskService, error) {
	value, err := getRecord(ctx, js, TaskServiceKey, "the task service", ErrNoTaskService)
	if err != nil {
		return TaskService{}, err
	}
	var ts TaskService
	if err := json.Unmarshal(value, &ts); err != nil {
		return TaskService{}, fmt.Errorf("topology: the record in bucket %s, key %s, does not decode: %w", RecordBucket, TaskServiceKey, err)
	}
	if ts.Kind == "" {
		return TaskService{}, fmt.Errorf("topology: the record in bucket %s, key %s, names no kind of task service", RecordBucket, TaskServiceKey)
	}
	return ts, nil
}
