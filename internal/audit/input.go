package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

// This file reads what the audit checks: the streams, the consumer, the
// record of what was provisioned, and the task service's counters and
// records (or its listing).

// Input is everything the checker reads: the approval messages, receipts and
// dead letters from JetStream, and the task service's counters and records.
type Input struct {
	Messages    map[uint64]document.Identity
	Receipts    map[uint64][]*document.Receipt
	DeadLetters map[uint64]string
	Counts      provider.Counts
	// Service is the task service instance that answered the audit, with
	// the id of its store.
	Service  ServiceIdentity
	Requests []provider.RequestRecord
	Creates  []provider.CreateRecord
	Tasks    []provider.TaskRecord
	Intents  []provider.FirstResult
	// Deletes are the tasks deleted by their owners; Keys the service's
	// figures of keys (live, compacted), deleted tasks and retired
	// records; Scopes its counters per scope; Lifetime how long it keeps
	// keys and records.
	Deletes  []provider.DeleteRecord
	Keys     provider.KeyCounts
	Scopes   []provider.ScopeCounts
	Lifetime Lifetime
	Consumer ConsumerState
	// Listing, when set, is all the audit knows of a task service that
	// keeps no call log and no counters (a CalDAV collection): the tasks it
	// holds. Counts and the records above are then empty, and the checks
	// that need them are reported as not applicable.
	Listing *TaskListing
	// Ledger is the executors' intent ledger as read (nil: not read).
	Ledger *LedgerRead

	// Approvals holds each stored approval message's data and the time the
	// stream stored it, by stream sequence, for the gate to be re-run.
	Approvals map[uint64]Message
	// Stream is what the APPROVALS stream held when it was read.
	Stream StreamState
	// ReceiptsStored is, per approval message, when the RECEIPTS stream
	// stored its first receipt. Where it is missing, the receipts' own
	// issued_at stands in.
	ReceiptsStored map[uint64]time.Time
	// Undecodable lists the stored receipts that do not decode.
	Undecodable []Undecodable
	// Foreign lists the records of APPROVALS and DEADLETTERS that the
	// pipeline does not write: dead letters that do not decode, status
	// messages stored as approvals.
	Foreign []Undecodable
	// Topology is the streams' and the consumer's configuration as read,
	// with the record of what provisioning applied.
	Topology *Topology
	// MaxDeliver is the executors' delivery budget, from the shared
	// consumer as provisioned (0 or less: unbounded): deliveries beyond it
	// are dead-lettered without a call to the service.
	MaxDeliver int
	// Now is when the audit read its input; the zero time means time.Now.
	Now time.Time
}

// ServiceIdentity names the task service's store and the instance that
// answered the audit.
type ServiceIdentity struct {
	StoreID string `json:"store_id"`
	// OtherStoreIDs are the stores of the listed service's other
	// destinations, audited with StoreID's.
	OtherStoreIDs []string `json:"other_store_ids,omitempty"`
	// Name names a listed service ("CalDAV collection https://…/").
	Name     string `json:"name,omitempty"`
	Instance string `json:"instance,omitempty"`
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
}

// Message is one stored approval message.
type Message struct {
	Data   []byte
	Stored time.Time
	// Subject is the subject the message was stored on; the gate's re-run
	// compares it with the envelope's intent. Empty skips that comparison.
	Subject string
}

// StreamState is the APPROVALS stream's state when Load read it.
type StreamState struct {
	FirstSeq  uint64
	LastSeq   uint64
	Msgs      uint64
	FirstTime time.Time
	// MaxAge is the stream's MaxAge as provisioned, never as the stream
	// says now (a lowered MaxAge must not excuse a purge); zero means
	// messages never age out.
	MaxAge time.Duration
	// MaxAgeFrom says where MaxAge was read ("as provisioned", or the
	// topology's default when there is no record of what was provisioned).
	MaxAgeFrom string
	// LastSeqAfter is the stream's last sequence once Load had read
	// everything else: records naming a message stored meanwhile are after
	// the window, not missing.
	LastSeqAfter uint64
}

// Load reads the Input over the connection nc, from the fake task service.
func Load(ctx context.Context, nc *nats.Conn) (*Input, error) { return LoadWith(ctx, nc, nil) }

// LoadWith reads the Input over the connection nc. With a lister, the task
// service is known by its listing only (Input.Listing); without one, the
// fake task service's counters and records are read over nc.
func LoadWith(ctx context.Context, nc *nats.Conn, lister taskservice.Lister) (*Input, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	in := &Input{Messages: map[uint64]document.Identity{}, Approvals: map[uint64]Message{}, Now: time.Now()}
	if in.Topology, err = readTopology(ctx, js); err != nil {
		return nil, err
	}
	info, err := storedmsg.ReadStream(ctx, js, topology.ApprovalsStream, false, func(m jetstream.Msg) error {
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		if st := statusMessage(m); st != "" {
			in.Foreign = append(in.Foreign, Undecodable{Stream: topology.ApprovalsStream, Seq: meta.Sequence.Stream, Err: st})
		}
		in.Messages[meta.Sequence.Stream] = document.Identify(m.Data())
		in.Approvals[meta.Sequence.Stream] = Message{Data: m.Data(), Stored: meta.Timestamp, Subject: m.Subject()}
		return nil
	})
	if err != nil {
		return nil, err
	}
	provisioned := in.Topology.provisioned()
	in.Stream = StreamState{FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Msgs: info.State.Msgs,
		FirstTime: info.State.FirstTime, MaxAge: provisioned.Streams[topology.ApprovalsStream].MaxAge, MaxAgeFrom: in.Topology.source(),
		LastSeqAfter: info.State.LastSeq}
	if in.Receipts, in.ReceiptsStored, in.Undecodable, err = readReceipts(ctx, js); err != nil {
		return nil, err
	}
	var badDead []Undecodable
	if in.DeadLetters, badDead, err = ReadDeadLetters(ctx, js); err != nil {
		return nil, err
	}
	in.Foreign = append(in.Foreign, badDead...)
	var cc jetstream.ConsumerConfig
	if in.Consumer, cc, err = consumer(ctx, js); err != nil {
		return nil, err
	}
	// The executors call the service on deliveries up to their budget and
	// dead-letter later ones without a call: the budget as provisioned,
	// without a record the consumer's own.
	if in.Topology.Provisioned != nil {
		cc = in.Topology.Provisioned.Consumer
	}
	in.MaxDeliver = topology.CallBound(cc)
	in.Ledger = readLedger(ctx, js)
	if lister != nil {
		l, err := lister.ListTasks(ctx)
		if err != nil {
			return nil, fmt.Errorf("audit: listing the task service's tasks: %w", err)
		}
		in.Listing = &l
		in.Service = ServiceIdentity{StoreID: l.StoreID, OtherStoreIDs: l.OtherStoreIDs, Name: l.Name}
		return in, finishLoad(ctx, js, in)
	}
	if err := readService(ctx, provider.NewClient(nc), in); err != nil {
		return nil, err
	}
	return in, finishLoad(ctx, js, in)
}

// serviceReads bounds how often readService reads the records again
// because the service changed them while they were read.
const serviceReads = 5

// readService reads the task service's counters and every record into in.
// The service may change its records while they are read (a compaction in
// the background, a delete, a create from outside): the counters are read
// before and after, and the records read again until both agree, so that
// counters and records describe one state.
func readService(ctx context.Context, svc *provider.Client, in *Input) error {
	si, err := svc.Info(ctx)
	if err != nil {
		return fmt.Errorf("audit: reading the task service's counters: %w", err)
	}
	for try := 1; ; try++ {
		in.Requests, in.Creates, in.Tasks, in.Intents, in.Deletes = nil, nil, nil, nil, nil
		for _, kind := range []string{provider.RecordRequests, provider.RecordCreates, provider.RecordTasks, provider.RecordIntents, provider.RecordDeletes} {
			var after uint64
			for {
				page, err := svc.Records(ctx, provider.RecordsRequest{Kind: kind, AfterSeq: after, Limit: provider.MaxRecordsLimit})
				if err != nil {
					return fmt.Errorf("audit: reading the task service's %s: %w", kind, err)
				}
				in.Requests = append(in.Requests, page.Requests...)
				in.Creates = append(in.Creates, page.Creates...)
				in.Tasks = append(in.Tasks, page.Tasks...)
				in.Intents = append(in.Intents, page.Intents...)
				in.Deletes = append(in.Deletes, page.Deletes...)
				if page.NextSeq == 0 || page.NextSeq == after {
					break
				}
				after = page.NextSeq
			}
		}
		again, err := svc.Info(ctx)
		if err != nil {
			return fmt.Errorf("audit: reading the task service's counters: %w", err)
		}
		same := again.Counts == si.Counts && again.Keys == si.Keys
		si = again
		if same || try == serviceReads {
			break
		}
	}
	in.Counts, in.Keys, in.Scopes = si.Counts, si.Keys, si.Scopes
	in.Service = ServiceIdentity{StoreID: si.StoreID, Instance: si.Instance, Host: si.Host, PID: si.PID}
	if in.Lifetime, err = serviceLifetime(si); err != nil {
		return err
	}
	return nil
}

// finishLoad notes the APPROVALS stream's last sequence once everything
// else was read.
func finishLoad(ctx context.Context, js jetstream.JetStream, in *Input) error {
	s, err := js.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		return fmt.Errorf("audit: opening stream %s: %w", topology.ApprovalsStream, err)
	}
	end, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("audit: reading stream %s: %w", topology.ApprovalsStream, err)
	}
	in.Stream.LastSeqAfter = max(in.Stream.LastSeq, end.State.LastSeq)
	return nil
}
