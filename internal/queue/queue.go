package queue

// Append appends first to dst, then what is queued on q now, until dst
// holds limit items, q is empty, or q is closed; it never waits. It returns
// the extended slice.
func Append[T any](dst []T, first T, q <-chan T, limit int) []T {
	dst = append(dst, first)
	for len(dst) < limit {
		select {
		case v, ok := <-q:
			if !ok {
				return dst
			}
			dst = append(dst, v)
		default:
			return dst
		}
	}
	return dst
}
