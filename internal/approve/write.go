package approve

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
)

// ErrWouldBeRefused is returned by Write when the approval it made would not
// pass the gate's binding checks together with the candidate and the request.
var ErrWouldBeRefused = errors.New("approve: the approval would not pass the gate")

// Write approves (see Approve) and returns the approval with its indented
// JSON, ending in a newline, as the commands write it to a file and the
// console keeps it. Before it hands the bytes out it runs the gate's binding
// checks on the three documents together, exactly as an executor would
// (gate.CheckDocumentBindings), so that no approval is written that the
// gate would refuse.
func Write(candidate, request []byte, opts Options) (*document.Approval, []byte, error) {
	return write(candidate, request, opts, func(c, r, a []byte) error {
		_, err := gate.CheckDocumentBindings(c, r, a)
		return err
	})
}

// write is Write with the self-check passed in, so that a test can see a
// refusal stop the approval.
func write(candidate, request []byte, opts Options, check func(candidate, request, approval []byte) error) (*document.Approval, []byte, error) {
	a, err := Approve(candidate, request, opts)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("approve: encoding the approval: %w", err)
	}
	b = append(b, '\n')
	if err := check(candidate, request, b); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrWouldBeRefused, err)
	}
	return a, b, nil
}
