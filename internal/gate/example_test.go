package gate_test

import (
	"errors"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// The seed scenario's original envelope passes the gate; each tampered copy
// of it stops at its own check, naming the field path.
func Example() {
	s, err := scenario.Build()
	if err != nil {
		panic(err)
	}

	v, err := gate.CheckBindings(s.Original.Envelope())
	if err != nil {
		panic(err)
	}
	fmt.Printf("original: pass, intent %s, request %s\n", v.Request.IntentID, v.Request.RequestID)

	var edited error
	for _, tc := range s.TamperedCases() {
		_, err := gate.CheckBindings(tc.Envelope)
		var ge *gate.Error
		if !errors.As(err, &ge) {
			panic(fmt.Sprintf("%s: the gate let it through", tc.Name))
		}
		fmt.Printf("%s: stopped at %s (%s)\n", tc.Name, ge.Check, ge.Path)
		if tc.Name == "request-edited-after-approval" {
			edited = err
		}
	}

	// A refusal also matches its check's sentinel.
	fmt.Println("edited request is ErrRequestBinding:", errors.Is(edited, gate.ErrRequestBinding))

	// Output:
	// original: pass, intent intent-0001, request task-request-0001
	// no-approval: stopped at approval_format ($.approval)
	// approval-of-another-kind: stopped at approval_format ($.approval.schema_version)
	// candidate-changed: stopped at candidate_binding ($.candidate)
	// source-version-changed: stopped at candidate_binding ($.candidate.source.version)
	// request-edited-after-approval: stopped at request_binding ($.request)
	// capability-publish-substituted: stopped at capability ($.approval.capabilities)
	// capability-publish-added: stopped at capability ($.approval.capabilities)
	// edited request is ErrRequestBinding: true
}
