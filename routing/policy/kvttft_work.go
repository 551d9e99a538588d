package policy

import (
	"sync"

	"github.com/kvrouter/kvrouter/routing"
)

// recentWork is the prefill a selector has sent to each worker over its
// recent decisions, in blocks: every decision multiplies every sum by
// 1 - 1/window and adds the request's uncached blocks to the chosen
// worker's, so a sum covers about the last window decisions. Counting
// decisions rather than time keeps the selector free of a clock and the
// figure independent of the arrival rate.
//
// The decay is applied lazily: sums are stored multiplied by scale, which
// grows by 1/(1 - 1/window) per decision, so a decision costs no
// exponentiation; both are brought back to scale 1 before scale overflows.
// Workers have slots in sums; the slots of the last decision's candidates
// are kept by position, because consecutive decisions usually see the
// same candidates in the same order, and a comparison is much cheaper
// than a map lookup. Callers hold mu.
type recentWork struct {
	mu     sync.Mutex
	growth float64 // 1 / (1 - 1/window)
	scale  float64
	sums   []float64
	slot   map[routing.Worker]int
	// last and lastSlot are the last decision's candidates and their
	// slots, by position.
	last     []routing.Worker
	lastSlot []int
}

// rescaleAt is where the stored sums are brought back to scale 1, far
// below float64's range.
const rescaleAt = 1e150

func newRecentWork(window float64) *recentWork {
	w := &recentWork{growth: 1, scale: 1, slot: make(map[routing.Worker]int)}
	if window > 1 {
		w.growth = window / (window - 1)
	}
	return w
}

// slots returns the slot of each candidate, giving new workers one. The
// result is valid until the next call.
func (r *recentWork) slots(cands []Candidate) []int {
	if len(r.last) != len(cands) {
		r.last, r.lastSlot = make([]routing.Worker, len(cands)), make([]int, len(cands))
		for i := range r.lastSlot {
			r.lastSlot[i] = -1
		}
	}
	for i := range cands {
		w := cands[i].Info.Worker
		if r.lastSlot[i] >= 0 && r.last[i] == w {
			continue
		}
		s, ok := r.slot[w]
		if !ok {
			s = len(r.sums)
			r.slot[w] = s
			r.sums = append(r.sums, 0)
		}
		r.last[i], r.lastSlot[i] = w, s
	}
	return r.lastSlot
}

// value is the recent work of the worker in slot s.
func (r *recentWork) value(s int) float64 { return r.sums[s] / r.scale }

// add records a decision that sent blocks of prefill to the worker in
// slot s.
func (r *recentWork) add(s int, blocks float64) {
	r.scale *= r.growth
	r.sums[s] += blocks * r.scale
	if r.scale > rescaleAt {
		r.rescale()
	}
}

// rescale brings the sums back to scale 1 and drops the workers whose
// sums have decayed to nothing, so that workers that left do not stay
// forever.
func (r *recentWork) rescale() {
	sums := make([]float64, 0, len(r.slot))
	for w, s := range r.slot {
		if v := r.sums[s] / r.scale; v < 1e-3 {
			delete(r.slot, w)
		} else {
			r.slot[w] = len(sums)
			sums = append(sums, v)
		}
	}
	r.sums, r.scale, r.last, r.lastSlot = sums, 1, nil, nil
}
