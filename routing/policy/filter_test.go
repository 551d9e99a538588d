package policy

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// fleet is three engines: engine 1 with ranks 0 and 1, engines 2 and 3 with
// rank 0. Each advertises 100 blocks and 1000 batched tokens.
func fleet() []Candidate {
	out := []Candidate{c(1, 0, 0, 0, 0), c(1, 0, 0, 0, 0), c(2, 0, 0, 0, 0), c(3, 0, 0, 0, 0)}
	out[1].Info.Worker.Rank = 1
	for i := range out {
		out[i].Info.TotalBlocks, out[i].Info.MaxBatchedTokens = 100, 1000
	}
	return out
}

// busy marks candidate i of cands as over every threshold used below.
func busy(cands []Candidate, i ...int) []Candidate {
	for _, k := range i {
		cands[k].Active = routing.Load{DecodeBlocks: 95, PrefillTokens: 5000}
	}
	return cands
}

// workers lists the candidates' workers in order.
func workers(cands []Candidate) []routing.Worker {
	out := make([]routing.Worker, len(cands))
	for i := range cands {
		out[i] = cands[i].Info.Worker
	}
	return out
}

func TestPipelineRoute(t *testing.T) {
	th := Thresholds{ActiveDecodeBlocks: new(0.9)}
	tests := []struct {
		name    string
		req     Request
		cands   []Candidate
		want    []routing.Worker // eligible
		wantErr error
	}{
		{name: "all eligible", req: Request{BlockSize: 16}, cands: fleet(),
			want: []routing.Worker{{ID: 1}, {ID: 1, Rank: 1}, {ID: 2}, {ID: 3}}},
		{name: "allowed set", req: Request{BlockSize: 16, Allowed: []routing.WorkerID{3, 1}}, cands: fleet(),
			want: []routing.Worker{{ID: 1}, {ID: 1, Rank: 1}, {ID: 3}}},
		{name: "nothing allowed", req: Request{BlockSize: 16, Allowed: []routing.WorkerID{}}, cands: fleet(),
			wantErr: ErrNoCompatibleWorker},
		{name: "pinned rank", req: Request{BlockSize: 16, Pin: &Pin{Worker: 1, Rank: 1}}, cands: fleet(),
			want: []routing.Worker{{ID: 1, Rank: 1}}},
		{name: "pinned any rank", req: Request{BlockSize: 16, Pin: &Pin{Worker: 1, AnyRank: true}}, cands: fleet(),
			want: []routing.Worker{{ID: 1}, {ID: 1, Rank: 1}}},
		{name: "pinned unknown worker", req: Request{BlockSize: 16, Pin: &Pin{Worker: 7}}, cands: fleet(),
			wantErr: ErrPinnedWorkerNotFound},
		{name: "pinned rank out of range", req: Request{BlockSize: 16, Pin: &Pin{Worker: 2, Rank: 1}}, cands: fleet(),
			wantErr: ErrPinnedRankOutOfRange},
		{name: "pin outside allowed set", req: Request{BlockSize: 16, Pin: &Pin{Worker: 2}, Allowed: []routing.WorkerID{1}},
			cands: fleet(), wantErr: ErrPinnedWorkerNotFound},
		{name: "busy workers dropped", req: Request{BlockSize: 16}, cands: busy(fleet(), 0, 2),
			want: []routing.Worker{{ID: 1, Rank: 1}, {ID: 3}}},
		{name: "all busy", req: Request{BlockSize: 16}, cands: busy(fleet(), 0, 1, 2, 3),
			wantErr: ErrAllWorkersOverloaded},
		{name: "pinned busy is not rerouted", req: Request{BlockSize: 16, Pin: &Pin{Worker: 2}}, cands: busy(fleet(), 2),
			wantErr: ErrPinnedWorkerOverloaded},
		{name: "no candidates", req: Request{BlockSize: 16}, wantErr: ErrNoCompatibleWorker},
		{name: "bad block size", req: Request{}, cands: fleet(), wantErr: ErrInvalidRequest},
		{name: "negative isl", req: Request{ISLTokens: -1, BlockSize: 16}, cands: fleet(), wantErr: ErrInvalidRequest},
		{name: "negative load", req: Request{BlockSize: 16}, cands: []Candidate{c(1, 0, -1, 0, 0)}, wantErr: ErrInvalidRequest},
		{name: "bad override", req: Request{BlockSize: 16, Overrides: Overrides{PrefillLoadScale: new(math.NaN())}},
			cands: fleet(), wantErr: ErrInvalidRequest},
	}
	p, err := NewPipeline(th, LeastLoaded{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d Decision
			err := p.Route(&d, &tc.req, tc.cands)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got := workers(d.Eligible)
			if len(got) != len(tc.want) {
				t.Fatalf("eligible %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("eligible %v, want %v", got, tc.want)
				}
			}
			if d.Worker != d.Eligible[d.Index].Info.Worker {
				t.Fatalf("decision %v is not Eligible[%d]", d.Worker, d.Index)
			}
		})
	}
}

func TestThresholdsBusy(t *testing.T) {
	info := routing.WorkerInfo{TotalBlocks: 100, MaxBatchedTokens: 1000}
	tests := []struct {
		name   string
		th     Thresholds
		info   routing.WorkerInfo
		active routing.Load
		want   bool
	}{
		{name: "unset", th: Thresholds{}, info: info, active: routing.Load{DecodeBlocks: 100, PrefillTokens: 1e6}},
		{name: "decode at threshold is not busy", th: Thresholds{ActiveDecodeBlocks: new(0.5)}, info: info,
			active: routing.Load{DecodeBlocks: 50}},
		{name: "decode above threshold", th: Thresholds{ActiveDecodeBlocks: new(0.5)}, info: info,
			active: routing.Load{DecodeBlocks: 51}, want: true},
		{name: "decode without capacity never busy", th: Thresholds{ActiveDecodeBlocks: new(0.0)},
			active: routing.Load{DecodeBlocks: 51}},
		{name: "prefill absolute", th: Thresholds{ActivePrefillTokens: new(int64(500))}, info: info,
			active: routing.Load{PrefillTokens: 501}, want: true},
		{name: "prefill fraction", th: Thresholds{ActivePrefillTokensFrac: new(1.5)}, info: info,
			active: routing.Load{PrefillTokens: 1501}, want: true},
		{name: "prefill fraction at limit", th: Thresholds{ActivePrefillTokensFrac: new(1.5)}, info: info,
			active: routing.Load{PrefillTokens: 1500}},
		{name: "prefill OR semantics", th: Thresholds{ActivePrefillTokens: new(int64(10_000)), ActivePrefillTokensFrac: new(0.1)},
			info: info, active: routing.Load{PrefillTokens: 101}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cand := Candidate{Info: tc.info, Active: tc.active}
			if got := tc.th.Busy(&cand); got != tc.want {
				t.Fatalf("Busy = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestThresholdsValidate(t *testing.T) {
	tests := []struct {
		name string
		th   Thresholds
		key  string
	}{
		{name: "decode above 1", th: Thresholds{ActiveDecodeBlocks: new(1.1)}, key: "active_decode_blocks_threshold"},
		{name: "decode NaN", th: Thresholds{ActiveDecodeBlocks: new(math.NaN())}, key: "active_decode_blocks_threshold"},
		{name: "prefill negative", th: Thresholds{ActivePrefillTokens: new(int64(-1))}, key: "active_prefill_tokens_threshold must"},
		{name: "fraction negative", th: Thresholds{ActivePrefillTokensFrac: new(-0.1)}, key: "active_prefill_tokens_threshold_frac"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPipeline(tc.th, LeastLoaded{}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("NewPipeline() = %v, want error naming %q", err, tc.key)
			}
		})
	}
	if _, err := NewPipeline(Thresholds{}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil selector: %v", err)
	}
	var p Pipeline
	if err := p.Route(&Decision{}, &Request{BlockSize: 1}, fleet()); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("zero pipeline: %v", err)
	}
}
