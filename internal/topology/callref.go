package topology

import (
	"strconv"
	"strings"
)

// CallRef names one handling's call to the task service, as the service
// records it: "APPROVALS:<stream_seq>:<delivery>:<attempt>". The executor
// makes it; the audit reads it back with ParseCallRef.
func CallRef(seq, delivered uint64, attempt string) string {
	return ApprovalsStream + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.FormatUint(delivered, 10) + ":" + attempt
}

// ParseCallRef reads the approval message's stream sequence and the
// delivery out of a call reference CallRef made; ok is false for anything
// else (a call from outside the pipeline).
func ParseCallRef(ref string) (seq, delivered uint64, ok bool) {
	parts := strings.Split(ref, ":")
	if len(parts) != 4 || parts[0] != ApprovalsStream || parts[3] == "" {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(parts[1], 10, 64)
	d, err2 := strconv.ParseUint(parts[2], 10, 64)
	return s, d, err1 == nil && err2 == nil
}
