package canon

// Scratch keeps the maps of the objects of one parsed tree, so that the
// next parse with it fills them instead of allocating new ones: an object's
// map is its largest allocation, and a strict decoder that checks a tree and
// drops it builds one for every document it reads. The zero Scratch is
// ready to use; one Scratch serves one parse at a time.
type Scratch struct {
	objects []map[string]any
	used    int
	// arrays are the tree's arrays, usedArrays of them, kept likewise.
	arrays     [][]any
	usedArrays int
	// path is the parser's path, kept for its capacity.
	path []pathSeg
}

// Scratch bounds: a map that held more than maxReusedMembers members (and
// grew beyond one group of slots) is not kept, nor an array of more than
// maxReusedItems items, nor more than maxReusedObjects maps or arrays, so
// that one large document does not keep its memory alive.
const (
	maxReusedMembers = 8
	maxReusedItems   = 16
	maxReusedObjects = 64
)

// ParseWith is Parse filling the maps that s kept from its last parse.
// The tree is valid until s.Reset: its objects are emptied then (its
// strings stay valid).
func ParseWith(data []byte, lim Limits, s *Scratch) (any, error) {
	return parse(data, lim, s)
}

// Reset empties the objects of the tree that the last ParseWith made, for
// the next one to fill: that tree, and every object and array taken from
// it, must not be used after.
func (s *Scratch) Reset() {
	for i, m := range s.objects[:s.used] {
		if len(m) > maxReusedMembers {
			s.objects[i] = nil
			continue
		}
		clear(m)
	}
	if len(s.objects) > maxReusedObjects {
		clear(s.objects[maxReusedObjects:])
		s.objects = s.objects[:maxReusedObjects]
	}
	for i, a := range s.arrays[:s.usedArrays] {
		if cap(a) > maxReusedItems {
			s.arrays[i] = nil
			continue
		}
		clear(a)
		s.arrays[i] = a[:0]
	}
	if len(s.arrays) > maxReusedObjects {
		clear(s.arrays[maxReusedObjects:])
		s.arrays = s.arrays[:maxReusedObjects]
	}
	s.used, s.usedArrays = 0, 0
}

// object returns an empty map for the next object of the tree.
func (s *Scratch) object() map[string]any {
	if s.used == len(s.objects) {
		s.objects = append(s.objects, nil)
	}
	m := s.objects[s.used]
	if m == nil {
		m = make(map[string]any)
		s.objects[s.used] = m
	}
	s.used++
	return m
}

// array returns an empty array for the next array of the tree, and the slot
// that keeps it.
func (s *Scratch) array() ([]any, int) {
	if s.usedArrays == len(s.arrays) {
		s.arrays = append(s.arrays, nil)
	}
	slot := s.usedArrays
	s.usedArrays++
	if a := s.arrays[slot]; a != nil {
		return a, slot
	}
	return make([]any, 0, 4), slot
}
