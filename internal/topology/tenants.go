package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
)

// A tenant's approvals reach APPROVALS through an intake stream of its
// own. APPROVALS takes a message whatever its subject, so one stream can
// bound a tenant only by what the tenant may store in a stream of its own:
// a tenant publishes approvals.<scope>.<intent> in its account, which
// deploy/auth maps to intake.<scope>.<intent> in the streams' account, where
// INTAKE_<scope> stores it, up to Config.TenantMaxBytes (DiscardNew, the
// MaxAge of APPROVALS). APPROVALS sources every intake, its subject mapped
// back to approvals.<scope>.<intent>, so that the executors, verify and
// redrive read one stream as before. The intake acknowledges the publish
// with its own sequence; package send then reads the APPROVALS sequence
// of the sourced copy (a direct get of the key's last approval, which
// names the intake and its sequence in its Nats-Stream-Source header).

// Intake subjects and streams.
const (
	intakePrefix       = "intake."
	IntakeStreamPrefix = "INTAKE_"
	// DefaultTenantMaxBytes is what one tenant may hold at once: 64 MiB,
	// some 700 approvals of the largest valid size or tens of thousands of
	// usual ones over MaxAge.
	DefaultTenantMaxBytes = 64 << 20
	// SourceHeaderAllowance is room for the Nats-Stream-Source header
	// APPROVALS adds to a sourced message (stream, sequence, the subject
	// mapping and the original subject: under 500 bytes with a scope and
	// an intent token of their longest), so that every message an intake
	// takes fits in APPROVALS: a sourced message APPROVALS refused would
	// stop its tenant's source.
	SourceHeaderAllowance = 1 << 10
	IntakeMaxMsg          = ApprovalMaxMsg - SourceHeaderAllowance
	// IntakeMsgCost is what each approval counts against its tenant's
	// bound at least: an intake holds at most TenantMaxBytes/IntakeMsgCost
	// approvals, however small. Each approval makes a receipt (some 800
	// bytes for one the gate refuses), so a tenant sending the smallest
	// messages it can makes no more receipts than its bound allows.
	IntakeMsgCost = 1 << 10
)

// ErrTenantBounds says that the tenants' bounds together leave APPROVALS
// too little room.
var ErrTenantBounds = errors.New("topology: the tenants' bounds do not fit in APPROVALS")

// IntakeStream is the name of scope's intake stream.
func IntakeStream(scope string) string { return IntakeStreamPrefix + scope }

// IntakeSubjects are the subjects of scope's intake stream, what
// deploy/auth maps the tenant's approvals.<scope>.> to.
func IntakeSubjects(scope string) string { return intakePrefix + scope + ".>" }

// CheckTenants refuses a list of tenants that names an invalid scope or
// one twice, and tenants whose bounds together exceed half of what
// APPROVALS holds: the other half is for the roles that publish into
// APPROVALS directly (the publisher, the operator's redrives).
func CheckTenants(c Config) error {
	c = c.withDefaults()
	for i, scope := range c.Tenants {
		if !document.ValidScope(scope) {
			return fmt.Errorf("topology: tenant %q: not a caller scope (1 to 64 lower-case letters, digits, '-' and '_', starting with a letter or digit)", scope)
		}
		if slices.Contains(c.Tenants[:i], scope) {
			return fmt.Errorf("topology: tenant %q named twice", scope)
		}
	}
	if c.TenantMaxBytes < IntakeMaxMsg {
		return fmt.Errorf("%w: a tenant's bound of %d bytes holds not even one approval of the largest valid size (%d bytes)", ErrTenantBounds, c.TenantMaxBytes, IntakeMaxMsg)
	}
	if total := int64(len(c.Tenants)) * c.TenantMaxBytes; c.MaxBytes != unlimitedMaxBytes && total > c.MaxBytes/2 {
		return fmt.Errorf("%w: %d tenants of %d bytes each hold %d bytes, more than half of the %d APPROVALS holds; raise --max-bytes or lower --tenant-max-bytes",
			ErrTenantBounds, len(c.Tenants), c.TenantMaxBytes, total, c.MaxBytes)
	}
	return nil
}

// IntakeConfig is scope's intake stream: what the tenant may hold, in bytes
// and in approvals (IntakeMsgCost), refusing more (DiscardNew) for as long
// as APPROVALS keeps a message, with the
// APPROVALS de-duplication window and a message bound that leaves room for
// the source header.
func IntakeConfig(c Config, scope string) jetstream.StreamConfig {
	c = c.withDefaults()
	sc := streamConfig(c, IntakeStream(scope), "approvals of tenant "+scope+", bounded, sourced by "+ApprovalsStream, IntakeSubjects(scope), IntakeMaxMsg)
	sc.MaxBytes = c.TenantMaxBytes
	sc.MaxMsgs = c.TenantMaxBytes / IntakeMsgCost
	sc.AllowAtomicPublish = true
	return sc
}

// intakeSource is how APPROVALS sources scope's intake: every message, its
// subject mapped back to approvals.<scope>.<intent>.
func intakeSource(scope string) *jetstream.StreamSource {
	return &jetstream.StreamSource{
		Name: IntakeStream(scope),
		SubjectTransforms: []jetstream.SubjectTransformConfig{
			{Source: IntakeSubjects(scope), Destination: "approvals." + scope + ".>"},
		},
	}
}

// ensureIntakes creates or updates the intake of each of c.Tenants and
// sets the sources of approvals to them. With no tenants named, approvals
// keeps the sources the existing stream has: an executor that provisions
// never drops the tenants provisioning set up.
func ensureIntakes(ctx context.Context, js jetstream.JetStream, c Config, approvals *jetstream.StreamConfig) error {
	if len(c.Tenants) == 0 {
		s, err := js.Stream(ctx, ApprovalsStream)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("topology: reading stream %s: %w", ApprovalsStream, err)
		}
		approvals.Sources = s.CachedInfo().Config.Sources
		return nil
	}
	if err := CheckTenants(c); err != nil {
		return err
	}
	approvals.Sources = nil
	for _, scope := range c.Tenants {
		sc := IntakeConfig(c, scope)
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("topology: creating stream %s: %w", sc.Name, err)
		}
		approvals.Sources = append(approvals.Sources, intakeSource(scope))
	}
	return nil
}

// HeaderStreamSource is the header a stream adds to a message it sourced:
// the stream it came from, its sequence there, the subject mapping and the
// original subject.
const HeaderStreamSource = "Nats-Stream-Source"

// SourcedFrom returns the stream and sequence a Nats-Stream-Source header
// names ("INTAKE_tenant-a 17 intake.tenant-a.> approvals.tenant-a.> …"),
// and whether it names any.
func SourcedFrom(header string) (stream, seq string, ok bool) {
	f := strings.Fields(header)
	if len(f) < 2 {
		return "", "", false
	}
	return f[0], f[1], true
}
