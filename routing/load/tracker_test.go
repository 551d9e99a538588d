package load

import (
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// step is one lifecycle call and the loads expected after it.
type step struct {
	op      string // add, prefill, output, free, expire, remove
	req     Request
	id      string
	n       int
	at      time.Duration // offset from t0
	wantErr error
	wantN   int // result of free (1 = true), expire or remove
	want    map[routing.Worker]routing.Load
}

// run applies the steps in order and checks each expectation.
func run(t *testing.T, tr *Tracker, steps []step) {
	t.Helper()
	for i, s := range steps {
		var err error
		n := 0
		switch s.op {
		case "add":
			err = tr.Add(s.req, t0.Add(s.at))
		case "prefill":
			err = tr.PrefillComplete(s.id)
		case "output":
			err = tr.AddOutputTokens(s.id, s.n)
		case "free":
			if tr.Free(s.id) {
				n = 1
			}
		case "expire":
			n = tr.Expire(t0.Add(s.at))
		case "remove":
			n = tr.RemoveWorker(s.req.Worker)
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("step %d (%s): err = %v, want %v", i, s.op, err, s.wantErr)
		}
		if n != s.wantN {
			t.Fatalf("step %d (%s): n = %d, want %d", i, s.op, n, s.wantN)
		}
		for w, want := range s.want {
			if got := tr.Active(w); got != want {
				t.Fatalf("step %d (%s): Active(%v) = %+v, want %+v", i, s.op, w, got, want)
			}
		}
	}
}

func TestLifecycle(t *testing.T) {
	a := chain(1, 2, 3, 4)     // 4 blocks
	b := chain(1, 2, 3, 9, 10) // shares 3 blocks with a
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{
			name: "add prefill free",
			cfg:  DefaultConfig(16),
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 70, CachedBlocks: 2},
					want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 38, DecodeBlocks: 5, ActiveRequests: 1}, w2: {}}},
				{op: "prefill", id: "a",
					want: map[routing.Worker]routing.Load{w1: {DecodeBlocks: 5, ActiveRequests: 1}}},
				{op: "prefill", id: "a",
					want: map[routing.Worker]routing.Load{w1: {DecodeBlocks: 5, ActiveRequests: 1}}},
				{op: "free", id: "a", wantN: 1, want: map[routing.Worker]routing.Load{w1: {}}},
				{op: "free", id: "a", wantN: 0, want: map[routing.Worker]routing.Load{w1: {}}},
				{op: "prefill", id: "a", wantErr: ErrUnknownRequest},
			},
		},
		{
			name: "dedup shares prompt blocks on one worker",
			cfg:  DefaultConfig(16),
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64}},
				{op: "add", req: Request{ID: "b", Worker: w1, Hashes: b, ISLTokens: 80, CachedBlocks: 3},
					want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 64 + 32, DecodeBlocks: 4 + 2, ActiveRequests: 2}}},
				{op: "add", req: Request{ID: "c", Worker: w2, Hashes: b, ISLTokens: 80},
					want: map[routing.Worker]routing.Load{w2: {PrefillTokens: 80, DecodeBlocks: 5, ActiveRequests: 1}}},
				{op: "free", id: "a", wantN: 1,
					want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 32, DecodeBlocks: 5, ActiveRequests: 1}}},
				{op: "free", id: "b", wantN: 1, want: map[routing.Worker]routing.Load{w1: {}}},
			},
		},
		{
			name: "no dedup without kv reuse",
			cfg:  noKVReuse(16),
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64}},
				{op: "add", req: Request{ID: "b", Worker: w1, Hashes: b, ISLTokens: 81},
					want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 145, DecodeBlocks: 4 + 6, ActiveRequests: 2}}},
				{op: "free", id: "b", wantN: 1,
					want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 64, DecodeBlocks: 4, ActiveRequests: 1}}},
			},
		},
		{
			name: "ranks are separate workers",
			cfg:  DefaultConfig(16),
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64}},
				{op: "add", req: Request{ID: "b", Worker: w1r1, Hashes: a, ISLTokens: 64},
					want: map[routing.Worker]routing.Load{
						w1:   {PrefillTokens: 64, DecodeBlocks: 4, ActiveRequests: 1},
						w1r1: {PrefillTokens: 64, DecodeBlocks: 4, ActiveRequests: 1}}},
				{op: "remove", req: Request{Worker: w1}, wantN: 1,
					want: map[routing.Worker]routing.Load{w1: {}, w1r1: {PrefillTokens: 64, DecodeBlocks: 4, ActiveRequests: 1}}},
			},
		},
		{
			name: "active blocks not tracked",
			cfg:  Config{BlockSize: 16, TrackPrefillTokens: true, TrackOutputBlocks: true},
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64, OutputTokens: 40},
					want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 64, ActiveRequests: 1}}},
			},
		},
		{
			name: "prefill tracking off",
			cfg:  Config{BlockSize: 16, TrackActiveBlocks: true, AssumeKVReuse: true},
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64},
					want: map[routing.Worker]routing.Load{w1: {DecodeBlocks: 4, ActiveRequests: 1}}},
			},
		},
		{
			name: "cached prefix longer than prompt",
			cfg:  DefaultConfig(16),
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64, CachedBlocks: 9},
					want: map[routing.Worker]routing.Load{w1: {DecodeBlocks: 4, ActiveRequests: 1}}},
			},
		},
		{
			name: "empty prompt",
			cfg:  DefaultConfig(16),
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1},
					want: map[routing.Worker]routing.Load{w1: {ActiveRequests: 1}}},
				{op: "free", id: "a", wantN: 1, want: map[routing.Worker]routing.Load{w1: {}}},
			},
		},
		{
			name: "bad input is refused without side effects",
			cfg:  DefaultConfig(16),
			steps: []step{
				{op: "add", req: Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64}},
				{op: "add", req: Request{ID: "a", Worker: w2, Hashes: a, ISLTokens: 64}, wantErr: ErrDuplicateRequest,
					want: map[routing.Worker]routing.Load{w2: {}}},
				{op: "add", req: Request{ID: "", Worker: w2}, wantErr: ErrInvalidRequest},
				{op: "add", req: Request{ID: "x", Worker: w2, ISLTokens: -1}, wantErr: ErrInvalidRequest},
				{op: "add", req: Request{ID: "x", Worker: w2, CachedBlocks: -1}, wantErr: ErrInvalidRequest},
				{op: "add", req: Request{ID: "x", Worker: w2, Hashes: a, ISLTokens: 63}, wantErr: ErrInvalidRequest},
				{op: "output", id: "a", n: -1, wantErr: ErrInvalidRequest},
				{op: "output", id: "nope", n: 1, wantErr: ErrUnknownRequest,
					want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 64, DecodeBlocks: 4, ActiveRequests: 1}, w2: {}}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run(t, newTracker(t, tc.cfg), tc.steps)
		})
	}
}

func TestOutputBlocks(t *testing.T) {
	on := DefaultConfig(16)
	on.TrackOutputBlocks = true
	tests := []struct {
		name string
		cfg  Config
		want []int64 // decode blocks after each output call
	}{
		// ISL 40 = 3 blocks (last one holds 8 tokens); outputs of 8, 1, 16, 15
		// take the sequence to 48, 49, 65, 80 tokens: 3, 4, 5, 5 blocks.
		{name: "on", cfg: on, want: []int64{3, 4, 5, 5}},
		{name: "off", cfg: DefaultConfig(16), want: []int64{3, 3, 3, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, tc.cfg)
			mustAdd(t, tr, Request{ID: "a", Worker: w1, Hashes: chain(1, 2), ISLTokens: 40}, t0)
			for i, n := range []int{8, 1, 16, 15} {
				if err := tr.AddOutputTokens("a", n); err != nil {
					t.Fatal(err)
				}
				got := tr.Active(w1)
				if got.DecodeBlocks != tc.want[i] || got.PrefillTokens != 0 {
					t.Fatalf("after output %d: %+v, want %d blocks and no prefill", i, got, tc.want[i])
				}
			}
			tr.Free("a")
			assertIdle(t, tr)
		})
	}
}

func TestExpire(t *testing.T) {
	tr := newTracker(t, DefaultConfig(16))
	mustAdd(t, tr, Request{ID: "old", Worker: w1, Hashes: chain(1), ISLTokens: 16}, t0)
	mustAdd(t, tr, Request{ID: "new", Worker: w1, Hashes: chain(1), ISLTokens: 16}, t0.Add(200*time.Second))
	if n := tr.Expire(t0.Add(300 * time.Second)); n != 0 {
		t.Fatalf("Expire at exactly the max age freed %d, want 0", n)
	}
	if n := tr.Expire(t0.Add(301 * time.Second)); n != 1 {
		t.Fatalf("Expire freed %d, want 1", n)
	}
	if tr.Free("old") {
		t.Fatal("expired request was still active")
	}
	if got := tr.Active(w1); got != (routing.Load{PrefillTokens: 16, DecodeBlocks: 1, ActiveRequests: 1}) {
		t.Fatalf("Active = %+v", got)
	}
	if n := tr.Expire(t0.Add(time.Hour)); n != 1 || tr.ExpiredTotal() != 2 {
		t.Fatalf("second Expire = %d, total %d; want 1, 2", n, tr.ExpiredTotal())
	}
	assertIdle(t, tr)
}

func TestExpireDisabled(t *testing.T) {
	cfg := DefaultConfig(16)
	cfg.MaxRequestAge = 0
	tr := newTracker(t, cfg)
	mustAdd(t, tr, Request{ID: "a", Worker: w1}, t0)
	if n := tr.Expire(t0.Add(24 * time.Hour)); n != 0 || tr.Len() != 1 {
		t.Fatalf("Expire with expiry disabled freed %d, len %d", n, tr.Len())
	}
}
