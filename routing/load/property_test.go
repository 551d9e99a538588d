package load

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"pgregory.net/rapid"
)

// model is the brute-force reference the tracker is compared with: it
// recomputes every worker's load from the list of active requests.
type model struct {
	cfg  Config
	reqs map[string]*modelReq
}

type modelReq struct {
	Request
	prefilling bool
	output     int
	at         time.Time
}

// load recomputes one worker's load from scratch.
func (m *model) load(w routing.Worker) routing.Load {
	var l routing.Load
	var out float64
	seen := map[routing.SeqHash]bool{}
	bs := int64(m.cfg.BlockSize)
	for _, r := range m.reqs {
		if r.Worker != w {
			continue
		}
		l.ActiveRequests++
		if r.prefilling && m.cfg.TrackPrefillTokens {
			l.PrefillTokens += max(0, int64(r.ISLTokens)-int64(r.CachedBlocks)*bs)
		}
		l.DecodeBlocks += ceilDiv(int64(r.ISLTokens), bs)
		if m.cfg.TrackOutputBlocks {
			out += m.outputWeight(r)
		}
		if m.cfg.AssumeKVReuse {
			for _, h := range r.Hashes {
				if seen[h] {
					l.DecodeBlocks--
				}
				seen[h] = true
			}
		}
	}
	l.DecodeBlocks += int64(math.Round(out + 1e-9))
	return l
}

// outputWeight is a request's output blocks times their weight: the
// expected output's blocks, or the generated ones once more, weighing
// 1 - decay*generated/expected (not below 0) when an expectation is set.
func (m *model) outputWeight(r *modelReq) float64 {
	bs := float64(m.cfg.BlockSize)
	blocks := func(out int) float64 {
		return math.Ceil(float64(r.ISLTokens+out)/bs) - math.Ceil(float64(r.ISLTokens)/bs)
	}
	n := max(blocks(r.OutputTokens), blocks(r.output))
	if r.OutputTokens == 0 || m.cfg.OutputDecay == 0 {
		return n
	}
	return math.Round(1000*n*max(0, 1-m.cfg.OutputDecay*float64(r.output)/float64(r.OutputTokens))) / 1000
}

// promptGen draws a prompt as a path in a small tree of chained blocks, so
// that prompts share prefixes the way conversations do.
func promptGen(t *rapid.T, bs int) ([]routing.SeqHash, int) {
	n := rapid.IntRange(0, 6).Draw(t, "blocks")
	locals := make([]uint64, n)
	for i := range locals {
		locals[i] = uint64(rapid.IntRange(1, 3).Draw(t, "local"))
	}
	tail := rapid.IntRange(0, 2*bs).Draw(t, "tail")
	return chain(locals...), n*bs + tail
}

func TestTrackerMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig(rapid.SampledFrom([]int{1, 4, 16}).Draw(t, "bs"))
		cfg.AssumeKVReuse = rapid.Bool().Draw(t, "reuse")
		cfg.TrackPrefillTokens = rapid.Bool().Draw(t, "prefill")
		cfg.TrackOutputBlocks = rapid.Bool().Draw(t, "output")
		cfg.OutputDecay = rapid.SampledFrom([]float64{0, 0.5, 1, 2}).Draw(t, "decay")
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := &model{cfg: cfg, reqs: map[string]*modelReq{}}
		workers := []routing.Worker{w1, w2, w1r1}
		now := t0
		var ids []string
		for i := range rapid.IntRange(1, 60).Draw(t, "ops") {
			now = now.Add(time.Duration(rapid.IntRange(0, 120).Draw(t, "dt")) * time.Second)
			id := fmt.Sprintf("r%d", rapid.IntRange(0, max(0, len(ids)-1)).Draw(t, "pick"))
			switch op := rapid.IntRange(0, 5).Draw(t, "op"); {
			case op <= 1 || len(ids) == 0:
				checkProjectThenAdd(t, tr, m, workers, fmt.Sprintf("r%d", len(ids)), now, cfg.BlockSize)
				ids = append(ids, fmt.Sprintf("r%d", len(ids)))
			case op == 2:
				if err := tr.PrefillComplete(id); err == nil {
					m.reqs[id].prefilling = false
				}
			case op == 3:
				n := rapid.IntRange(0, 40).Draw(t, "out")
				if err := tr.AddOutputTokens(id, n); err == nil {
					m.reqs[id].prefilling = false
					m.reqs[id].output += n
				}
			case op == 4:
				if got, want := tr.Free(id), m.reqs[id] != nil; got != want {
					t.Fatalf("op %d: Free(%s) = %v, want %v", i, id, got, want)
				}
				delete(m.reqs, id)
			default:
				n := tr.Expire(now)
				for k, r := range m.reqs {
					if now.Sub(r.at) > cfg.MaxRequestAge {
						delete(m.reqs, k)
						n--
					}
				}
				if n != 0 {
					t.Fatalf("op %d: Expire count differs from model by %d", i, n)
				}
			}
			checkLoads(t, tr, m, workers)
		}
		for _, id := range ids {
			tr.Free(id)
		}
		assertIdle(t, tr)
		for _, w := range workers {
			if l := tr.Active(w); l != (routing.Load{}) {
				t.Fatalf("after freeing all, Active(%v) = %+v", w, l)
			}
		}
	})
}

// checkProjectThenAdd projects a random request, books it on a random
// worker, and checks that the projection for that worker was exact.
func checkProjectThenAdd(t *rapid.T, tr *Tracker, m *model, ws []routing.Worker, id string, now time.Time, bs int) {
	hashes, isl := promptGen(t, bs)
	matches := make([]routing.Match, len(ws))
	for i, w := range ws {
		matches[i] = routing.Match{Worker: w, Overlap: routing.Overlap{Device: int32(rapid.IntRange(0, len(hashes)+1).Draw(t, "cached"))}}
	}
	osl := rapid.SampledFrom([]int{0, 0, 1, 7, 40}).Draw(t, "osl")
	pot, err := tr.Potential(nil, Query{Hashes: hashes, ISLTokens: isl, OutputTokens: osl}, matches)
	if err != nil {
		t.Fatal(err)
	}
	k := rapid.IntRange(0, len(ws)-1).Draw(t, "worker")
	r := Request{ID: id, Worker: ws[k], Hashes: hashes, ISLTokens: isl, CachedBlocks: int(matches[k].Device), OutputTokens: osl}
	if err := tr.Add(r, now); err != nil {
		t.Fatal(err)
	}
	m.reqs[id] = &modelReq{Request: r, prefilling: true, at: now}
	want := pot[k]
	want.ActiveRequests++
	if !tr.Config().TrackPrefillTokens {
		// The projection still carries the request's own uncached tokens,
		// which the cost model needs, but nothing is booked as load.
		want.PrefillTokens = 0
	}
	if got := tr.Active(ws[k]); got != want {
		t.Fatalf("Add(%s) gave %+v, projection promised %+v", id, got, want)
	}
}

// checkLoads compares every worker's load with the model and checks that
// no figure is negative.
func checkLoads(t *rapid.T, tr *Tracker, m *model, ws []routing.Worker) {
	for _, w := range ws {
		got, want := tr.Active(w), m.load(w)
		if got != want {
			t.Fatalf("Active(%v) = %+v, model %+v", w, got, want)
		}
		if got.PrefillTokens < 0 || got.DecodeBlocks < 0 || got.ActiveRequests < 0 {
			t.Fatalf("negative load %+v", got)
		}
	}
	if tr.Len() != len(m.reqs) {
		t.Fatalf("Len = %d, model %d", tr.Len(), len(m.reqs))
	}
}
