package producer

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// testPool is the pool every test publishes.
var testPool = PoolID{DC: "dc-a", Domain: Domain{Model: "m", BlockSize: 16, HashScheme: HashSchemeXXH3Chain, HashSeed: 1337}}

// newTestProducer returns a producer with a fixed-seed generator.
func newTestProducer(t testing.TB, capacity, queue int) *Producer {
	t.Helper()
	p, err := New(testPool, Config{Filter: filter.Config{Capacity: capacity, Seed: 7}, QueueLen: queue}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// mirror is a subscriber's copy of the filter, built from a feed.
type mirror struct {
	epoch, seq uint64
	c          filter.Summary
}

// newMirror decodes a feed's snapshot.
func newMirror(t tb, f *Feed) *mirror {
	t.Helper()
	c, err := filter.Decode(f.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	return &mirror{epoch: f.Epoch, seq: f.Seq, c: c}
}

// drain applies every queued update of f, checking contiguity.
func (m *mirror) drain(t tb, f *Feed) {
	t.Helper()
	for {
		select {
		case u, ok := <-f.Updates():
			if !ok {
				return
			}
			m.apply(t, u)
		default:
			return
		}
	}
}

// apply installs one update.
func (m *mirror) apply(t tb, u Update) {
	t.Helper()
	if u.Epoch != m.epoch {
		t.Fatalf("update of epoch %#x on a mirror of epoch %#x", u.Epoch, m.epoch)
	}
	if u.Kind == UpdateHeartbeat {
		if u.Seq != m.seq {
			t.Fatalf("heartbeat at seq %d, mirror at %d", u.Seq, m.seq)
		}
		return
	}
	if u.Seq != m.seq+1 {
		t.Fatalf("delta seq %d after %d", u.Seq, m.seq)
	}
	d, err := filter.DecodeDelta(u.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.c.Apply(d); err != nil {
		t.Fatal(err)
	}
	m.seq = u.Seq
}

// assertSame fails unless the mirror's encoding equals the producer's.
func (m *mirror) assertSame(t tb, p *Producer) {
	t.Helper()
	want, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("mirror (%d entries) differs from producer", m.c.Len())
	}
}

// stored and removed build one-change batches.
func stored(w routing.Worker, hs ...routing.SeqHash) Change {
	return Change{Kind: Stored, Worker: w, Hashes: hs}
}

func removed(w routing.Worker, hs ...routing.SeqHash) Change {
	return Change{Kind: Removed, Worker: w, Hashes: hs}
}

// batch wraps changes in an unindexed batch.
func batch(cs ...Change) Batch { return Batch{Changes: cs} }

// newRandForTest returns a fixed-seed generator.
func newRandForTest() *rand.Rand { return rand.New(rand.NewPCG(3, 4)) }

// tb is the part of testing.TB that *rapid.T also has.
type tb interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}
