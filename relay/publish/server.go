package publish

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// Defaults of ServerConfig.
const (
	// DefaultChunkBytes bounds one snapshot chunk at 1 MiB, a quarter of
	// gRPC's default 4 MiB receive limit, so subscribers need no raised
	// limit and a chunk never holds a stream for long on a slow link.
	DefaultChunkBytes = 1 << 20
	// MinChunkBytes keeps chunk counts sane.
	MinChunkBytes = 1024
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// ChunkBytes bounds the data of one snapshot chunk.
	ChunkBytes int
}

// Server serves the Relay gRPC service for the producers registered with
// it, one per pool. It is safe for concurrent use.
type Server struct {
	kvrpb.UnimplementedRelayServer
	cfg       ServerConfig
	mu        sync.RWMutex
	producers map[producer.PoolID]*producer.Producer
}

var _ kvrpb.RelayServer = (*Server)(nil)

// NewServer returns a server without producers.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = DefaultChunkBytes
	}
	if cfg.ChunkBytes < MinChunkBytes {
		return nil, fmt.Errorf("%w: chunk bytes %d below %d", ErrInvalidRequest, cfg.ChunkBytes, MinChunkBytes)
	}
	return &Server{cfg: cfg, producers: make(map[producer.PoolID]*producer.Producer)}, nil
}

// Register publishes p under its pool. A producer already registered for
// the pool is retired: its subscribers see ErrProducerChanged and
// resubscribe to p, whose epoch differs.
func (s *Server) Register(p *producer.Producer) {
	s.mu.Lock()
	old := s.producers[p.Pool()]
	s.producers[p.Pool()] = p
	s.mu.Unlock()
	if old != nil && old != p {
		old.Retire()
	}
}

// Unregister stops publishing pool; its subscribers see ErrUnavailable
// (the producer is closed) and then ErrUnknownPool.
func (s *Server) Unregister(pool producer.PoolID) {
	s.mu.Lock()
	p := s.producers[pool]
	delete(s.producers, pool)
	s.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

// Beat queues a heartbeat on every feed of every producer; the owner calls
// it on a ticker (see Run) with its clock reading.
func (s *Server) Beat(now time.Time) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.producers {
		p.Beat(now)
	}
}

// Run beats every interval until ctx ends.
func (s *Server) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Beat(now)
		}
	}
}

// lookup returns the producer of pool.
func (s *Server) lookup(pool producer.PoolID) *producer.Producer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.producers[pool]
}

// Subscribe serves one subscriber: validate, snapshot, then the feed's
// updates until the feed or the stream ends.
func (s *Server) Subscribe(req *kvrpb.RelaySubscribeRequest, stream grpc.ServerStreamingServer[kvrpb.RelayMessage]) error {
	ctx := stream.Context()
	pool, err := checkRequest(req)
	if err != nil {
		return toStatus(ctx, err)
	}
	p := s.lookup(pool)
	if p == nil {
		return toStatus(ctx, fmt.Errorf("%w: %v", ErrUnknownPool, pool))
	}
	f, err := p.Subscribe()
	if err != nil {
		return toStatus(ctx, err)
	}
	defer f.Close()
	if err := s.sendSnapshot(stream, f); err != nil {
		return err
	}
	return s.stream(ctx, stream, f)
}

// stream forwards the feed's updates until one side ends.
func (s *Server) stream(ctx context.Context, stream grpc.ServerStreamingServer[kvrpb.RelayMessage], f *producer.Feed) error {
	for {
		select {
		case <-ctx.Done():
			return toStatus(ctx, ctx.Err())
		case u, ok := <-f.Updates():
			if !ok {
				return toStatus(ctx, f.Err())
			}
			if err := stream.Send(updateMessage(u)); err != nil {
				return err
			}
		}
	}
}

// sendSnapshot sends the feed's snapshot in chunks of at most ChunkBytes.
func (s *Server) sendSnapshot(stream grpc.ServerStreamingServer[kvrpb.RelayMessage], f *producer.Feed) error {
	for _, m := range snapshotMessages(f, s.cfg.ChunkBytes) {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

// snapshotMessages splits the feed's snapshot into chunk messages.
func snapshotMessages(f *producer.Feed, chunkBytes int) []*kvrpb.RelayMessage {
	data := f.Snapshot
	count := (len(data) + chunkBytes - 1) / chunkBytes
	ms := make([]*kvrpb.RelayMessage, count)
	for i := range ms {
		ms[i] = message()
		ms[i].Body = &kvrpb.RelayMessage_Snapshot{Snapshot: &kvrpb.RelaySnapshotChunk{
			Epoch: f.Epoch, Seq: f.Seq, Index: uint32(i), Count: uint32(count), TotalBytes: uint64(len(data)),
			Data: data[i*chunkBytes : min((i+1)*chunkBytes, len(data))]}}
	}
	return ms
}

// updateMessage converts a feed update for the wire.
func updateMessage(u producer.Update) *kvrpb.RelayMessage {
	m := message()
	switch u.Kind {
	case producer.UpdateDelta:
		m.Body = &kvrpb.RelayMessage_Delta{Delta: &kvrpb.RelayDelta{Epoch: u.Epoch, Seq: u.Seq, Data: u.Delta}}
	default:
		m.Body = &kvrpb.RelayMessage_Heartbeat{Heartbeat: &kvrpb.RelayHeartbeat{
			Epoch: u.Epoch, Seq: u.Seq, Load: loadToProto(u.Load), Entries: uint64(max(u.Entries, 0))}}
	}
	return m
}
