package server

import (
	"errors"
	"sync"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/routing"
)

// ErrStopped is the outcome of a request still in flight when the engine
// stopped.
var ErrStopped = errors.New("mocker server: engine stopped")

// pending is one request in flight, shared by the rank driver that produces
// its tokens and the HTTP handler that streams them. The driver never
// blocks on it: it raises counters under mu and signals notify, whose one
// slot coalesces signals, so a slow or vanished client costs the driver
// nothing.
type pending struct {
	id        string
	maxTokens int
	notify    chan struct{}

	// Fields below are written by the rank driver under the rank mutex,
	// so they need no lock of their own.
	decoding bool // credited one token per iteration
	emitted  int  // tokens already announced

	// lora and salt name the request's adapter and cache salt, and blocks
	// its prompt blocks in the rank's token book (vLLM wire only); set
	// before submit and used under the rank mutex.
	lora, salt string
	blocks     []routing.LocalHash

	mu       sync.Mutex
	progress // guarded by mu
}

func newPending(id string, maxTokens int) *pending {
	return &pending{id: id, maxTokens: maxTokens, notify: make(chan struct{}, 1)}
}

// progress is what a handler reads: tokens generated so far and, once
// finished, the completion or the error that ended the request.
type progress struct {
	tokens   int
	finished bool
	done     mocker.Completion
	err      error
}

// announce raises the token count to n and signals the handler.
func (p *pending) announce(n int) {
	p.emitted = n
	p.mu.Lock()
	p.tokens = n
	p.mu.Unlock()
	p.signal()
}

// finish records the completion: every output token is then available.
func (p *pending) finish(c mocker.Completion) {
	p.emitted = c.OutputTokens
	p.mu.Lock()
	p.tokens, p.finished, p.done = c.OutputTokens, true, c
	p.mu.Unlock()
	p.signal()
}

// abort ends the request with err, keeping the tokens already announced.
func (p *pending) abort(err error) {
	p.mu.Lock()
	p.finished, p.err = true, err
	p.mu.Unlock()
	p.signal()
}

func (p *pending) signal() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// read returns the current progress.
func (p *pending) read() progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.progress
}

// succeeded reports a request that finished without error.
func (pr progress) succeeded() bool { return pr.finished && pr.err == nil }
