package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"
)

// replayEnd is the end marker's sequence field: -1, 8 bytes big-endian.
var replayEnd = binary.BigEndian.AppendUint64(nil, ^uint64(0))

// zmqLogger silences zmq4's own logger.
var zmqLogger = log.New(io.Discard, "", 0)

// replayEntry is one published batch kept for replay.
type replayEntry struct {
	seq     uint64
	payload []byte
}

// vllmPub is one rank's vLLM-style publisher: a PUB socket sending
// [topic, seq, payload] and a ROUTER socket answering replay requests from
// a bounded buffer of past batches. The sequence counts from 0 per
// process, as vLLM's does, and survives reopening the sockets.
type vllmPub struct {
	log                *slog.Logger
	endpoint, replayEP string
	topic              []byte
	limit              int
	// intercept, when set, sees each replay request first (a test hook:
	// InterceptReplays).
	intercept atomic.Pointer[func(from uint64) bool]

	mu     sync.Mutex // guards everything below
	seq    uint64
	ring   []replayEntry
	head   int // index of the oldest entry once the ring is full
	pub    zmq4.Socket
	router zmq4.Socket
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newVLLMPub(cfg *Config, rank uint32, log *slog.Logger) (*vllmPub, error) {
	ep, _, err := rankEndpoint(cfg.KVEventsEndpoint, rank)
	if err != nil {
		return nil, fmt.Errorf("%w: kv_events_endpoint: %w", ErrConfig, err)
	}
	p := &vllmPub{log: log, endpoint: ep, topic: []byte(cfg.KVEventsTopic), limit: cfg.ReplayBufferSteps}
	if cfg.ReplayEndpoint != "" {
		if p.replayEP, _, err = rankEndpoint(cfg.ReplayEndpoint, rank); err != nil {
			return nil, fmt.Errorf("%w: replay_endpoint: %w", ErrConfig, err)
		}
	}
	return p, nil
}

// open binds the sockets (again, after close) and starts answering
// replays. A port-0 endpoint binds a free port, and later opens rebind
// the same one, so that subscribers can reconnect.
func (p *vllmPub) open() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	pub := zmq4.NewPub(ctx, zmq4.WithLogger(zmqLogger))
	if err := pub.Listen(p.endpoint); err != nil {
		cancel()
		return fmt.Errorf("kv events endpoint %s: %w", p.endpoint, err)
	}
	p.endpoint = "tcp://" + pub.Addr().String()
	p.pub, p.cancel = pub, cancel
	if p.replayEP == "" {
		return nil
	}
	router := zmq4.NewRouter(ctx, zmq4.WithLogger(zmqLogger))
	if err := router.Listen(p.replayEP); err != nil {
		_ = pub.Close()
		cancel()
		p.pub = nil
		return fmt.Errorf("replay endpoint %s: %w", p.replayEP, err)
	}
	p.replayEP = "tcp://" + router.Addr().String()
	p.router = router
	p.wg.Go(func() { p.serveReplays(router) })
	return nil
}

// close unbinds the sockets and waits for the replay server. zmq4 v0.17.0
// leaves one idle goroutine per closed PUB socket (its Close does not stop
// the socket's writer); a mocker opens a handful in its life. Batches
// published while closed are numbered and kept for replay, as a PUB
// socket without subscribers drops them.
func (p *vllmPub) close() {
	p.mu.Lock()
	pub, router, cancel := p.pub, p.router, p.cancel
	p.pub, p.router, p.cancel = nil, nil, nil
	p.mu.Unlock()
	if pub == nil {
		return
	}
	cancel()
	_ = pub.Close()
	if router != nil {
		_ = router.Close()
	}
	p.wg.Wait()
}

// endpoints returns the bound PUB and replay addresses.
func (p *vllmPub) endpoints() (string, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.endpoint, p.replayEP
}

// topics are the topics the PUB socket has subscribers for (none while
// it is closed).
func (p *vllmPub) topics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pub == nil {
		return nil
	}
	return p.pub.(zmq4.Topics).Topics()
}

// publish numbers payload, keeps it for replay and sends it unless drop
// is set (a test hook standing in for a lost message).
func (p *vllmPub) publish(payload []byte, drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.seq
	p.seq++
	p.keep(replayEntry{seq: seq, payload: payload})
	if drop || p.pub == nil {
		return
	}
	msg := zmq4.NewMsgFrom(p.topic, binary.BigEndian.AppendUint64(nil, seq), payload)
	if err := p.pub.SendMulti(msg); err != nil {
		p.log.Warn("publish kv event batch", "seq", seq, "err", err)
	}
}

// keep appends to the bounded replay buffer, dropping the oldest batch.
func (p *vllmPub) keep(e replayEntry) {
	if len(p.ring) < p.limit {
		p.ring = append(p.ring, e)
		return
	}
	p.ring[p.head] = e
	p.head = (p.head + 1) % len(p.ring)
}

// since returns the kept batches from sequence from on, in order.
func (p *vllmPub) since(from uint64) []replayEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []replayEntry
	for i := range p.ring {
		if e := p.ring[(p.head+i)%len(p.ring)]; e.seq >= from {
			out = append(out, e)
		}
	}
	return out
}

// serveReplays answers [identity, "", start] requests with [identity, "",
// seq, payload] for every kept batch from start on, then the end marker,
// as vLLM's publisher does. Malformed requests are logged and ignored.
func (p *vllmPub) serveReplays(router zmq4.Socket) {
	for {
		msg, err := router.Recv()
		if err != nil {
			return
		}
		f := msg.Frames
		if len(f) != 3 || len(f[2]) != 8 {
			p.log.Warn("invalid replay request", "frames", len(f))
			continue
		}
		id, from := f[0], binary.BigEndian.Uint64(f[2])
		if fn := p.intercept.Load(); fn != nil && !(*fn)(from) {
			continue
		}
		for _, e := range p.since(from) {
			seq := binary.BigEndian.AppendUint64(nil, e.seq)
			if err := router.SendMulti(zmq4.NewMsgFrom(id, nil, seq, e.payload)); err != nil {
				p.log.Warn("replay send", "err", err)
				break
			}
		}
		_ = router.SendMulti(zmq4.NewMsgFrom(id, nil, replayEnd, nil))
	}
}
