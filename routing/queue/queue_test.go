package queue

import (
	"errors"
	"testing"
	"time"
)

var epoch = time.Unix(1_700_000_000, 0)

func always(*Item) bool { return true }

func newQ(t *testing.T, o Order, classes ...ClassConfig) *Queue {
	t.Helper()
	if len(classes) == 0 {
		classes = []ClassConfig{{Name: "default"}}
	}
	q, err := New(Config{Order: o, Classes: classes, Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func item(class int, at time.Duration, jump float64, isl, cached int) *Item {
	return &Item{Class: class, Arrival: epoch.Add(at), Jump: jump, ISL: isl, Cached: cached}
}

func drain(q *Queue) []*Item {
	var out []*Item
	for it := q.Next(always); it != nil; it = q.Next(always) {
		out = append(out, it)
	}
	return out
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name  string
		order Order
		items []*Item
		want  []int // indexes of items in dispatch order
	}{
		{"fcfs by arrival", FCFS, []*Item{item(0, 2*time.Second, 0, 10, 0), item(0, time.Second, 0, 1000, 0)}, []int{1, 0}},
		{"fcfs priority jump moves arrival earlier", FCFS,
			[]*Item{item(0, time.Second, 0, 10, 0), item(0, 3*time.Second, 5, 10, 0)}, []int{1, 0}},
		{"fcfs jump smaller than the gap", FCFS,
			[]*Item{item(0, time.Second, 0, 10, 0), item(0, 3*time.Second, 1, 10, 0)}, []int{0, 1}},
		{"wspt shortest uncached first", WSPT,
			[]*Item{item(0, 0, 0, 1000, 0), item(0, time.Second, 0, 100, 0), item(0, 2*time.Second, 0, 1000, 950)}, []int{2, 1, 0}},
		{"wspt priority weights", WSPT,
			[]*Item{item(0, 0, 0, 100, 0), item(0, 0, 3, 300, 0)}, []int{1, 0}},
		{"ties keep arrival order", WSPT, []*Item{item(0, 0, 0, 100, 0), item(0, 0, 0, 100, 0)}, []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQ(t, tc.order)
			for _, it := range tc.items {
				if err := q.Push(it, 1); err != nil {
					t.Fatal(err)
				}
			}
			got := drain(q)
			for i, w := range tc.want {
				if got[i] != tc.items[w] {
					t.Fatalf("position %d: got item %v, want %d", i, got[i], w)
				}
			}
		})
	}
}

func TestStrictPriorityFirst(t *testing.T) {
	q := newQ(t, FCFS)
	a, b := item(0, 0, 100, 10, 0), item(0, time.Hour, 0, 10, 0)
	b.Strict = 1
	_ = q.Push(a, 1)
	_ = q.Push(b, 1)
	if got := q.Next(always); got != b {
		t.Fatal("strict tier 1 did not go first")
	}
}

func TestDRRShares(t *testing.T) {
	// Two classes weighted 3:1, both backlogged with equal-cost requests:
	// dispatch splits 3:1.
	q := newQ(t, FCFS, ClassConfig{Name: "premium", Quantum: 300}, ClassConfig{Name: "regular", Quantum: 100})
	for i := range 400 {
		_ = q.Push(item(0, time.Duration(i), 0, 100, 0), 1)
		_ = q.Push(item(1, time.Duration(i), 0, 100, 0), 1)
	}
	counts := [2]int{}
	for range 200 {
		counts[q.Next(always).Class]++
	}
	if counts[0] != 150 || counts[1] != 50 {
		t.Fatalf("shares %v, want [150 50]", counts)
	}
}

func TestDRRLargeCostsUseVirtualRounds(t *testing.T) {
	q := newQ(t, FCFS, ClassConfig{Name: "a", Quantum: 1}, ClassConfig{Name: "b", Quantum: 1})
	_ = q.Push(item(0, 0, 0, 1_000_000_000, 0), 1)
	if q.Next(always) == nil {
		t.Fatal("a huge request was never dispatched")
	}
}

func TestBlockedClassIsSkippedNotStarved(t *testing.T) {
	q := newQ(t, FCFS, ClassConfig{Name: "a", Quantum: 100}, ClassConfig{Name: "b", Quantum: 100})
	a, b := item(0, 0, 0, 100, 0), item(1, 0, 0, 100, 0)
	_ = q.Push(a, 1)
	_ = q.Push(b, 1)
	notA := func(it *Item) bool { return it.Class != 0 }
	if got := q.Next(notA); got != b {
		t.Fatal("the ready class was not served while the other was blocked")
	}
	if q.Next(notA) != nil {
		t.Fatal("a blocked class was dispatched")
	}
	if got := q.Next(always); got != a {
		t.Fatal("the blocked class was not served once ready")
	}
}

func TestLanes(t *testing.T) {
	q := newQ(t, FCFS)
	w1, w2 := &Lane{Key: 1}, &Lane{Key: 2}
	a, b, c := item(0, 0, 0, 10, 0), item(0, time.Second, 0, 10, 0), item(0, 2*time.Second, 0, 10, 0)
	a.Lane, b.Lane = w1, w2
	for _, it := range []*Item{a, b, c} {
		_ = q.Push(it, 2)
	}
	// Worker 1 is busy: its lane waits, the others go in order.
	only2 := func(it *Item) bool { return it.Lane == nil || it.Lane == w2 }
	if got := q.Next(only2); got != b {
		t.Fatal("want the ready lane's head")
	}
	if got := q.Next(only2); got != c {
		t.Fatal("want the shared head")
	}
	if q.Next(only2) != nil || q.Len() != 1 {
		t.Fatal("the busy worker's lane was dispatched")
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name  string
		cfg   ClassConfig
		items []*Item
		limit Limit
		at    int // index of the first refused item
	}{
		{"requests", ClassConfig{Name: "c", RequestsPerWorker: 2},
			[]*Item{item(0, 0, 0, 1, 0), item(0, 0, 0, 1, 0), item(0, 0, 0, 1, 0), item(0, 0, 0, 1, 0), item(0, 0, 0, 1, 0)}, LimitRequests, 4},
		{"isl: the crossing request is admitted", ClassConfig{Name: "c", RawISLTokensPerWorker: 100},
			[]*Item{item(0, 0, 0, 150, 0), item(0, 0, 0, 100, 0), item(0, 0, 0, 1, 0)}, LimitRawISLTokens, 2},
		{"cached", ClassConfig{Name: "c", CachedTokensPerWorker: 10},
			[]*Item{item(0, 0, 0, 50, 30), item(0, 0, 0, 50, 0)}, LimitCachedTokens, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQ(t, FCFS, tc.cfg)
			for i, it := range tc.items {
				err := q.Push(it, 2)
				if i < tc.at && err != nil {
					t.Fatalf("item %d refused: %v", i, err)
				}
				if i == tc.at {
					var le *LimitError
					if !errors.As(err, &le) || le.Limit != tc.limit || !errors.Is(err, ErrLimit) || le.Workers != 2 {
						t.Fatalf("item %d: got %v, want %s", i, err, tc.limit)
					}
					return
				}
			}
		})
	}
}

func TestRemoveAndRequeue(t *testing.T) {
	q := newQ(t, FCFS)
	a, b := item(0, 0, 0, 10, 0), item(0, time.Second, 0, 10, 0)
	_ = q.Push(a, 1)
	_ = q.Push(b, 1)
	if !q.Remove(a) || q.Remove(a) {
		t.Fatal("Remove should take a queued item exactly once")
	}
	if s := q.Stats(0); s.Pending != 1 || s.Removed != 1 || s.PendingISL != 10 {
		t.Fatalf("stats %+v", s)
	}
	got := q.Next(always)
	if got != b {
		t.Fatal("want b")
	}
	if err := q.Requeue(got); err != nil {
		t.Fatal(err)
	}
	if q.Next(always) != b {
		t.Fatal("a requeued item did not keep its place")
	}
}

func TestBadInput(t *testing.T) {
	q := newQ(t, FCFS)
	for name, it := range map[string]*Item{
		"nil": nil, "negative priority": item(0, 0, -1, 10, 0), "bad class": item(3, 0, 0, 10, 0),
		"negative isl": item(0, 0, 0, -1, 0),
	} {
		if err := q.Push(it, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalid) {
		t.Error("no classes accepted")
	}
	if _, err := ParseOrder("lifo"); !errors.Is(err, ErrInvalid) {
		t.Error("unknown order accepted")
	}
}
