package gateway

import (
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
	"pgregory.net/rapid"
)

// rtts configures dc-b at 100 ms and dc-c at 20 ms.
func rtts(dc string) (time.Duration, bool) {
	d, ok := map[string]time.Duration{"dc-b": 100 * time.Millisecond, "dc-c": 20 * time.Millisecond}[dc]
	return d, ok
}

func TestPolicyChoose(t *testing.T) {
	const bs = 64 // 64 tokens × 0.05 ms = 3.2 ms per block
	loaded := func(r consumer.Result, l producer.Load) consumer.Result { r.Load = l; return r }
	tests := []struct {
		name       string
		edit       func(*Policy)
		localDepth int
		localLoad  producer.Load
		remotes    []consumer.Result
		wantDC     string
	}{
		{name: "no remotes", wantDC: "dc-a"},
		// 40 blocks save 128 ms: beats dc-b's 100 ms round trip by 28.
		{name: "deep remote beats the round trip", remotes: []consumer.Result{lane("dc-b", 40)}, wantDC: "dc-b"},
		{name: "shallow remote does not", remotes: []consumer.Result{lane("dc-b", 30)}, wantDC: "dc-a"},
		{name: "local prefix counts", localDepth: 10, remotes: []consumer.Result{lane("dc-b", 40)}, wantDC: "dc-a"},
		{name: "the largest benefit wins", remotes: []consumer.Result{lane("dc-b", 60), lane("dc-c", 40)}, wantDC: "dc-c"},
		{name: "tie stays local", edit: func(p *Policy) { p.PrefillCostPerTokenMs = 100.0 / (32 * bs) },
			remotes: []consumer.Result{lane("dc-b", 32)}, wantDC: "dc-a"},
		{name: "margin", edit: func(p *Policy) { p.MinAdvantageMs = 50 }, remotes: []consumer.Result{lane("dc-b", 40)}, wantDC: "dc-a"},
		{name: "negative margin takes a tie remote", edit: func(p *Policy) { p.PrefillCostPerTokenMs = 100.0 / (32 * bs); p.MinAdvantageMs = -1 },
			remotes: []consumer.Result{lane("dc-b", 32)}, wantDC: "dc-b"},
		{name: "local only", edit: func(p *Policy) { p.LocalOnly = true }, remotes: []consumer.Result{lane("dc-c", 100)}, wantDC: "dc-a"},
		{name: "unready lane", remotes: []consumer.Result{{Pool: producer.PoolID{DC: "dc-c"}, Depth: 100, Load: producer.Load{Engines: 1}}}, wantDC: "dc-a"},
		{name: "stale lane", remotes: []consumer.Result{func() consumer.Result { r := lane("dc-c", 100); r.Staleness = time.Minute; return r }()}, wantDC: "dc-a"},
		{name: "no engines", remotes: []consumer.Result{loaded(lane("dc-c", 100), producer.Load{})}, wantDC: "dc-a"},
		{name: "full DC", remotes: []consumer.Result{loaded(lane("dc-c", 100), producer.Load{Engines: 1, Utilization: 0.97})}, wantDC: "dc-a"},
		// 40 blocks save 128 ms; 1,000 queued tokens per engine cost 50 ms.
		{name: "queued prefill", remotes: []consumer.Result{loaded(lane("dc-b", 40), producer.Load{Engines: 2, PrefillTokens: 2000})}, wantDC: "dc-a"},
		{name: "unconfigured DC", remotes: []consumer.Result{lane("dc-z", 1000)}, wantDC: "dc-a"},
		// A saturated local DC (200 ms penalty) spills to an idle one.
		{name: "local load", localLoad: producer.Load{Engines: 1, Utilization: 1}, remotes: []consumer.Result{lane("dc-c", 0)}, wantDC: "dc-c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Policy
			if tt.edit != nil {
				tt.edit(&p)
			}
			p.EnsureDefaults()
			ch := p.Choose(Candidate{DC: "dc-a", Depth: tt.localDepth, Load: tt.localLoad}, tt.remotes, bs, rtts)
			if ch.Best.DC != tt.wantDC || ch.Remote != (tt.wantDC != "dc-a") {
				t.Fatalf("chose %+v, want %s", ch.Best, tt.wantDC)
			}
		})
	}
}

// TestPolicyChoosesTheBestEligible checks Choose against the formula
// evaluated directly: the choice is an eligible DC (or local) whose
// benefit no eligible remote beats, and a remote choice strictly beats
// the local benefit plus the margin.
func TestPolicyChoosesTheBestEligible(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Policy{PrefillCostPerTokenMs: rapid.Float64Range(0.001, 1).Draw(t, "cost"),
			MinAdvantageMs: rapid.Float64Range(-20, 50).Draw(t, "margin")}
		p.EnsureDefaults()
		local := Candidate{DC: "dc-a", Depth: rapid.IntRange(0, 64).Draw(t, "local")}
		var rs []consumer.Result
		for _, dc := range []string{"dc-b", "dc-c"} {
			r := lane(dc, rapid.IntRange(0, 64).Draw(t, dc+"-depth"))
			r.Ready = rapid.Bool().Draw(t, dc+"-ready")
			r.Load.Utilization = rapid.Float64Range(0, 1).Draw(t, dc+"-util")
			rs = append(rs, r)
		}
		ch := p.Choose(local, rs, 16, rtts)
		lb := p.benefit(Candidate{Depth: local.Depth}, 16)
		for _, r := range rs {
			rtt, _ := rtts(r.Pool.DC)
			b := p.benefit(Candidate{Depth: r.Depth, RTT: rtt, Load: r.Load}, 16)
			if p.Eligible(r) && b > lb+p.MinAdvantageMs && b > ch.Best.Benefit {
				t.Fatalf("%s has benefit %v > chosen %+v", r.Pool.DC, b, ch.Best)
			}
			if ch.Remote && ch.Best.DC == r.Pool.DC && (!p.Eligible(r) || b <= lb+p.MinAdvantageMs) {
				t.Fatalf("chose ineligible or insufficient %s", r.Pool.DC)
			}
		}
	})
}

// refcount is a Refcounter over a set.
type refcount map[routing.SeqHash]int

func (r refcount) Refs(h routing.SeqHash) int { return r[h] }

func TestRefsIndexDepth(t *testing.T) {
	hs := []routing.SeqHash{1, 2, 3, 4}
	tests := []struct {
		name  string
		held  refcount
		model string
		want  int
	}{
		{name: "all held", held: refcount{1: 1, 2: 3, 3: 1, 4: 1}, model: "m", want: 4},
		{name: "prefix", held: refcount{1: 1, 2: 1, 4: 1}, model: "m", want: 2},
		{name: "first missing", held: refcount{2: 1}, model: "m", want: 0},
		{name: "unknown model", held: refcount{1: 1}, model: "x", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (RefsIndex{"m": tt.held}).Depth(tt.model, hs); got != tt.want {
				t.Fatalf("depth %d, want %d", got, tt.want)
			}
		})
	}
}
