//go:build chaos

package failpoint

import (
	"sync"
	"sync/atomic"
)

// Enabled reports whether failpoints are compiled in (a `-tags chaos`
// build).
const Enabled = true

// point is one failpoint's action and hit count.
type point struct {
	action atomic.Pointer[Action]
	hits   atomic.Uint64
}

var (
	mu     sync.Mutex
	points = map[string]*point{}
)

// get returns the point of name, creating it.
func get(name string) *point {
	mu.Lock()
	defer mu.Unlock()
	p := points[name]
	if p == nil {
		p = &point{}
		points[name] = p
	}
	return p
}

// Enable makes name run a when reached; a nil a only counts hits.
func Enable(name string, a Action) {
	if a == nil {
		a = func() {}
	}
	get(name).action.Store(&a)
}

// Disable stops name's action; hits are still counted.
func Disable(name string) { get(name).action.Store(nil) }

// Hits returns how many times name was reached.
func Hits(name string) uint64 { return get(name).hits.Load() }

// Inject counts a hit of name and runs its action, if enabled.
func Inject(name string) {
	p := get(name)
	p.hits.Add(1)
	if a := p.action.Load(); a != nil {
		(*a)()
	}
}
