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
)

// This file keeps the record of what provisioning applied, so that what
// reads the streams later (verify, an executor bound with --no-provision)
// judges them against what was provisioned, not against what they say of
// themselves now: someone who lowers a stream's MaxAge, or rewrites the
// executors' consumer, changes the live configuration but not the record.
//
// The record is the metadata of a stream of its own, RecordStream, which
// holds no messages: only a role that may create and update streams (the
// provisioning role) can write it, every role that may read a stream's
// info can read it, and it lives, without a TTL, as long as the stream.
// Each of the three streams and the consumer has one key, whose value is
// its configuration as the server returned it when provisioning applied
// it; the comparison with the live configuration is then exact.

// RecordStream is the stream whose metadata records what provisioning
// applied.
const RecordStream = "TOPOLOGY"

// RecordSubject is RecordStream's subject. Nothing is published there; the
// stream refuses anything but an empty message.
const RecordSubject = "sendtwice.topology"

// Metadata keys of the record.
const (
	recordAtKey        = "sendtwice.provisioned_at"
	recordStreamPrefix = "sendtwice.stream."
	recordConsumerKey  = "sendtwice.consumer." + ApprovalsStream + "." + Consumer
	// serverMetaPrefix marks the metadata the server keeps on every stream
	// and consumer (its version, the API level); it changes with an
	// upgrade, so it is never compared.
	serverMetaPrefix = "_nats."
)

// ErrNoRecord says that no record of what was provisioned exists: the
// topology was provisioned by an older version, or the record was deleted.
var ErrNoRecord = errors.New("topology: no record of what provisioning applied")

// Provisioned is what provisioning applied: the configuration of each
// stream and of the consumer.
type Provisioned struct {
	// At is when provisioning applied it (zero when not recorded).
	At time.Time
	// Streams are the three streams' configurations, by name.
	Streams map[string]jetstream.StreamConfig
	// Consumer is the executors' consumer's configuration.
	Consumer jetstream.ConsumerConfig
	// Recorded says the configurations are the server's, as recorded when
	// provisioning applied them, so that every field compares. Without it
	// they are what topology makes of a Config (Intended), and only the
	// fields topology sets compare.
	Recorded bool
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

// RecordConfig is RecordStream holding p as its metadata. It stores no
// messages: one byte at most, none deleted or purged.
func RecordConfig(replicas int, p Provisioned) (jetstream.StreamConfig, error) {
	md := map[string]string{recordAtKey: p.At.UTC().Format(time.RFC3339Nano)}
	for name, sc := range p.Streams {
		b, err := json.Marshal(sc)
		if err != nil {
			return jetstream.StreamConfig{}, fmt.Errorf("topology: recording stream %s: %w", name, err)
		}
		md[recordStreamPrefix+name] = string(b)
	}
	b, err := json.Marshal(p.Consumer)
	if err != nil {
		return jetstream.StreamConfig{}, fmt.Errorf("topology: recording consumer %s: %w", Consumer, err)
	}
	md[recordConsumerKey] = string(b)
	return jetstream.StreamConfig{
		Name:        RecordStream,
		Description: "what provisioning applied to the streams and the executors' consumer, in this stream's metadata; holds no messages",
		Subjects:    []string{RecordSubject},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    max(replicas, 1),
		MaxMsgs:     1,
		MaxMsgSize:  1,
		Discard:     jetstream.DiscardNew,
		DenyDelete:  true,
		DenyPurge:   true,
		Metadata:    md,
	}, nil
}

// record writes p as the record of what was provisioned.
func record(ctx context.Context, js jetstream.JetStream, replicas int, p Provisioned) error {
	sc, err := RecordConfig(replicas, p)
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Another provisioner created it between our update and create.
		_, err = js.UpdateStream(ctx, sc)
	}
	if err != nil {
		return fmt.Errorf("topology: recording what was provisioned in stream %s: %w", RecordStream, err)
	}
	return nil
}

// ReadRecord reads the record of what was provisioned. It returns an error
// wrapping ErrNoRecord when there is none, and says why when the record
// does not decode.
func ReadRecord(ctx context.Context, js jetstream.JetStream) (Provisioned, error) {
	s, err := js.Stream(ctx, RecordStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return Provisioned{}, fmt.Errorf("%w (no stream %s)", ErrNoRecord, RecordStream)
	}
	if err != nil {
		return Provisioned{}, fmt.Errorf("topology: reading the record of what was provisioned (stream %s): %w", RecordStream, err)
	}
	return decodeRecord(s.CachedInfo().Config.Metadata)
}

func decodeRecord(md map[string]string) (Provisioned, error) {
	p := Provisioned{Streams: map[string]jetstream.StreamConfig{}, Recorded: true}
	raw, ok := md[recordConsumerKey]
	if !ok {
		return Provisioned{}, fmt.Errorf("%w (stream %s has no key %s)", ErrNoRecord, RecordStream, recordConsumerKey)
	}
	if err := json.Unmarshal([]byte(raw), &p.Consumer); err != nil {
		return Provisioned{}, fmt.Errorf("topology: the record of consumer %s in stream %s does not decode: %w", Consumer, RecordStream, err)
	}
	for _, name := range StreamNames {
		raw, ok := md[recordStreamPrefix+name]
		if !ok {
			return Provisioned{}, fmt.Errorf("topology: the record in stream %s has no key %s", RecordStream, recordStreamPrefix+name)
		}
		var sc jetstream.StreamConfig
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			return Provisioned{}, fmt.Errorf("topology: the record of stream %s in stream %s does not decode: %w", name, RecordStream, err)
		}
		p.Streams[name] = sc
	}
	if at, err := time.Parse(time.RFC3339Nano, md[recordAtKey]); err == nil {
		p.At = at
	}
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
