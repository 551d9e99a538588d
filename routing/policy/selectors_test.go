package policy

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

func TestRoundRobin(t *testing.T) {
	cands := []Candidate{c(1, 0, 0, 0, 0), c(2, 0, 0, 0, 0), c(3, 0, 0, 0, 0)}
	var s RoundRobin
	var d Decision
	for i := range 7 {
		if err := s.Select(&d, &Request{}, cands); err != nil {
			t.Fatal(err)
		}
		if d.Index != i%3 {
			t.Fatalf("call %d picked %d, want %d", i, d.Index, i%3)
		}
	}
}

func TestRandomUniform(t *testing.T) {
	s, err := NewRandom(rng(5))
	if err != nil {
		t.Fatal(err)
	}
	cands := []Candidate{c(1, 0, 0, 0, 9), c(2, 0, 0, 0, 0), c(3, 0, 0, 0, 0), c(4, 0, 0, 0, 0)}
	got := counts(t, s, &Request{}, cands, 40000)
	if x := chiSquare(got, []float64{0.25, 0.25, 0.25, 0.25}); x > 16.27 {
		t.Fatalf("counts %v, chi-square %.2f", got, x)
	}
}

// TestPowerOfTwo checks the choice rule against its exact distribution: with
// loads 0 < 1 < 2 < 3, the worker of rank k (0 = least loaded) wins when it
// is sampled with a more loaded one, probability 2*(n-1-k)/(n*(n-1)).
func TestPowerOfTwo(t *testing.T) {
	s, err := NewPowerOfTwo(rng(9))
	if err != nil {
		t.Fatal(err)
	}
	cands := []Candidate{c(1, 0, 0, 0, 2), c(2, 0, 0, 0, 0), c(3, 0, 0, 0, 3), c(4, 0, 0, 0, 1)}
	got := counts(t, s, &Request{}, cands, 60000)
	// ranks by load: worker 2 (k=0), 4 (k=1), 1 (k=2), 3 (k=3).
	p := []float64{2.0 / 12, 6.0 / 12, 0, 4.0 / 12}
	if got[2] != 0 {
		t.Fatalf("the most loaded worker won %d times", got[2])
	}
	if x := chiSquare([]int{got[0], got[1], got[3]}, []float64{p[0], p[1], p[3]}); x > 13.82 {
		t.Fatalf("counts %v, chi-square %.2f", got, x)
	}
	var d Decision
	if err := s.Select(&d, &Request{}, cands[:1]); err != nil || d.Index != 0 {
		t.Fatalf("single candidate: %d, %v", d.Index, err)
	}
}

func TestLeastLoaded(t *testing.T) {
	cands := []Candidate{c(1, 0, 0, 0, 4), c(2, 0, 0, 0, 1), c(3, 0, 0, 0, 1)}
	var d Decision
	if err := (LeastLoaded{}).Select(&d, &Request{}, cands); err != nil || d.Index != 1 {
		t.Fatalf("picked %d, %v", d.Index, err)
	}
	// Equal active requests: the fewer decode blocks win.
	cands = []Candidate{c(1, 0, 0, 0, 4), c(2, 0, 0, 9, 1), c(3, 0, 0, 3, 1)}
	if err := (LeastLoaded{}).Select(&d, &Request{}, cands); err != nil || d.Index != 2 {
		t.Fatalf("tie on active requests: picked %d, %v; want the fewer decode blocks", d.Index, err)
	}
}

func TestDeviceAware(t *testing.T) {
	cpu := func(x Candidate) Candidate { x.Info.Device = routing.DeviceCPU; return x }
	tests := []struct {
		name   string
		cands  []Candidate
		want   int
		reason string
	}{
		{
			// accelerators: 12/(2*8) = 0.75; cpu: 1/(1*1) = 1.
			name:   "accelerators less loaded per weight",
			cands:  []Candidate{cpu(c(1, 0, 0, 0, 1)), c(2, 0, 0, 0, 7), c(3, 0, 0, 0, 5)},
			want:   2,
			reason: "accelerator",
		},
		{
			// accelerators: 20/(2*8) = 1.25; cpu: 2/(2*1) = 1.
			name:   "cpu group wins when lighter",
			cands:  []Candidate{cpu(c(1, 0, 0, 0, 2)), c(2, 0, 0, 0, 10), cpu(c(3, 0, 0, 0, 0)), c(4, 0, 0, 0, 10)},
			want:   2,
			reason: "cpu",
		},
		{
			name:   "only cpu workers",
			cands:  []Candidate{cpu(c(1, 0, 0, 0, 3)), cpu(c(2, 0, 0, 0, 2))},
			want:   1,
			reason: "cpu",
		},
		{
			name:   "equal group loads prefer accelerators",
			cands:  []Candidate{cpu(c(1, 0, 0, 0, 0)), c(2, 0, 0, 0, 0)},
			want:   1,
			reason: "accelerator",
		},
	}
	s, err := NewDeviceAware(DefaultDeviceAwareConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d Decision
			if err := s.Select(&d, &Request{}, tc.cands); err != nil {
				t.Fatal(err)
			}
			if d.Index != tc.want || d.Reason != tc.reason {
				t.Fatalf("picked %d (%s), want %d (%s)", d.Index, d.Reason, tc.want, tc.reason)
			}
		})
	}
	if _, err := NewDeviceAware(DeviceAwareConfig{CPUWeight: 1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("zero accelerator weight: %v", err)
	}
}

func TestDirect(t *testing.T) {
	r1 := c(1, 0, 0, 0, 5)
	r1.Info.Worker.Rank = 1
	cands := []Candidate{c(1, 0, 0, 0, 7), r1, c(2, 0, 0, 0, 0)}
	tests := []struct {
		name    string
		pin     *Pin
		want    int
		wantErr error
	}{
		{name: "exact rank", pin: &Pin{Worker: 1, Rank: 0}, want: 0},
		{name: "any rank takes least loaded", pin: &Pin{Worker: 1, AnyRank: true}, want: 1},
		{name: "no pin", wantErr: ErrNoPinnedWorker},
		{name: "unknown worker", pin: &Pin{Worker: 9}, wantErr: ErrPinnedWorkerNotFound},
		{name: "unknown rank", pin: &Pin{Worker: 2, Rank: 3}, wantErr: ErrPinnedWorkerNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d Decision
			err := (Direct{}).Select(&d, &Request{Pin: tc.pin}, cands)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && (d.Index != tc.want || d.Reason != "pinned") {
				t.Fatalf("picked %d (%s), want %d", d.Index, d.Reason, tc.want)
			}
		})
	}
}

// TestEmptyCandidates checks that every selector refuses an empty list with
// ErrNoCompatibleWorker instead of indexing into it.
func TestEmptyCandidates(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s, err := New(name, DefaultOptions(rng(1)))
			if err != nil {
				t.Fatal(err)
			}
			var d Decision
			err = s.Select(&d, &Request{BlockSize: 16, Pin: &Pin{Worker: 1}}, nil)
			want := ErrNoCompatibleWorker
			if name == NameDirect {
				want = ErrPinnedWorkerNotFound
			}
			if !errors.Is(err, want) {
				t.Fatalf("err = %v, want %v", err, want)
			}
		})
	}
}
