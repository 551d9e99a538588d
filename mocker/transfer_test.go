package mocker

import (
	"testing"
	"time"
)

// seqTokens returns n distinct tokens starting at base.
func seqTokens(base uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

// TestDisaggRemotePrefill: a decode engine's request waits for its
// transferred cache (latency plus per-token time), then computes only its
// prompt's tail, receives its complete blocks but the last token's, caches
// and publishes them, and decodes; a local prefill of the same prompt
// takes far longer to its first token.
func TestDisaggRemotePrefill(t *testing.T) {
	cfg := Config{BlockSize: 64}
	e, err := New(cfg, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	prompt := seqTokens(1, 1000) // 15 complete blocks and 40 tokens
	if err := e.Submit(Request{ID: "d", Tokens: prompt, MaxTokens: 4, RemotePrefill: true}, t0); err != nil {
		t.Fatal(err)
	}
	tm := e.Config().Timing
	ready := t0.Add(tm.TransferTime(960))
	if want := time.Millisecond + 960*3277; tm.TransferTime(960) != want {
		t.Fatalf("transfer time %v, want %v", tm.TransferTime(960), want)
	}
	if next, ok := e.NextEventTime(); !ok || !next.Equal(ready) {
		t.Fatalf("next event %v, want the cache's arrival %v", next, ready)
	}
	if l := e.Load(); l.Waiting != 1 || l.ActivePrefillTokens != 40 {
		t.Fatalf("load while the cache comes %+v", l)
	}
	var done Completion
	var stored int
	if _, err := drive(e, nil, func(r StepResult) error {
		for _, a := range r.Admitted {
			if !a.At.Equal(ready) || a.ReceivedBlocks != 15 || a.HitBlocks != 0 {
				t.Errorf("admission %+v, want 15 blocks received at %v", a, ready)
			}
		}
		for _, ev := range r.Events {
			stored += len(ev.Blocks)
		}
		if len(r.Finished) > 0 {
			done = r.Finished[0]
		}
		return checkInvariants(e)
	}); err != nil {
		t.Fatal(err)
	}
	if done.ReceivedBlocks != 15 || done.OutputTokens != 4 || stored != 15 {
		t.Fatalf("completion %+v, %d blocks stored", done, stored)
	}
	local, _ := New(cfg, testWorker)
	var localDone Completion
	if _, err := drive(local, []timedReq{{req: Request{ID: "a", Tokens: prompt, MaxTokens: 4}}}, func(r StepResult) error {
		if len(r.Finished) > 0 {
			localDone = r.Finished[0]
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if done.TTFT() >= localDone.TTFT() {
		t.Fatalf("TTFT %v with the cache received, %v computing it", done.TTFT(), localDone.TTFT())
	}
}

// TestDisaggTransferDoesNotBlockTheQueue: a request whose cache is still
// coming does not hold back one submitted after it.
func TestDisaggTransferDoesNotBlockTheQueue(t *testing.T) {
	e, err := New(Config{BlockSize: 64, Timing: Timing{KVTransferLatency: time.Second}}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(Request{ID: "remote", Tokens: seqTokens(1, 500), MaxTokens: 2, RemotePrefill: true}, t0); err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(Request{ID: "local", Tokens: seqTokens(9000, 100), MaxTokens: 2}, t0); err != nil {
		t.Fatal(err)
	}
	var order []string
	if _, err := drive(e, nil, func(r StepResult) error {
		for _, a := range r.Admitted {
			order = append(order, a.ID)
		}
		return checkInvariants(e)
	}); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "local" {
		t.Fatalf("admission order %v, want the local request first", order)
	}
}

// TestDisaggCancelDuringTransfer: a request canceled while its cache comes
// never runs, and the engine goes idle.
func TestDisaggCancelDuringTransfer(t *testing.T) {
	e, err := New(Config{BlockSize: 64}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(Request{ID: "d", Tokens: seqTokens(1, 500), MaxTokens: 2, RemotePrefill: true}, t0); err != nil {
		t.Fatal(err)
	}
	if !e.Cancel("d") || e.Cancel("d") {
		t.Fatal("Cancel during the transfer")
	}
	if _, busy := e.NextEventTime(); busy {
		t.Fatal("engine busy after its only request was canceled")
	}
	if l := e.Load(); l.Waiting != 0 {
		t.Fatalf("load %+v", l)
	}
}
