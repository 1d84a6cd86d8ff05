package queue_test

import (
	"slices"
	"testing"

	"github.com/sendtwice/sendtwice/internal/queue"
)

func TestAppendTakesWhatIsQueuedUpToTheLimitWithoutWaiting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued []int
		close  bool
		limit  int
		want   []int
		left   int
	}{
		{"nothing queued: the first alone", nil, false, 10, []int{0}, 0},
		{"fewer queued than the limit: all of them", []int{1, 2, 3}, false, 10, []int{0, 1, 2, 3}, 0},
		{"more queued than the limit: up to it, the rest stays", []int{1, 2, 3, 4, 5}, false, 3, []int{0, 1, 2}, 3},
		{"a closed queue ends the batch", []int{1}, true, 10, []int{0, 1}, 0},
		{"a limit of one: the first alone", []int{1, 2}, false, 1, []int{0}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := make(chan int, 10)
			for _, v := range tc.queued {
				q <- v
			}
			if tc.close {
				close(q)
			}
			got := queue.Append(nil, 0, q, tc.limit)
			if !slices.Equal(got, tc.want) {
				t.Errorf("took %v; want %v", got, tc.want)
			}
			if len(q) != tc.left {
				t.Errorf("%d left queued; want %d", len(q), tc.left)
			}
		})
	}
}

// The batch is appended to the slice given, so that a caller can reuse one.
func TestAppendReusesTheSliceGiven(t *testing.T) {
	buf := make([]int, 0, 4)
	q := make(chan int, 4)
	q <- 1
	got := queue.Append(buf, 0, q, 4)
	if &got[0] != &buf[:1][0] {
		t.Error("a new slice was made although the one given had room")
	}
}
