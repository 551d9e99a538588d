package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// selectDisaggFleet is a disaggregated fleet (SGLang's hand-off) whose
// node serves the selection API and the picker.
func selectDisaggFleet(t *testing.T) *fleet {
	return startDisaggFleet(t, true, func(c *node.Config) {
		c.Selection.Addr, c.Selection.ExtProcAddr = "127.0.0.1:0", "127.0.0.1:0"
	})
}

// cachedPrefill serves prompt through the node, so that a prefill
// engine caches it, and returns that engine's worker name ("1/0") once
// the index holds the prompt on it and its prefill is no longer booked
// or reported.
// (A count of stored events is no such condition: the decode engine's
// events can make it first.)
func (f *fleet) cachedPrefill(prompt []int) string {
	f.t.Helper()
	_, prefill := f.streamPair(prompt)
	f.waitCached(prompt, prefill)
	f.waitPrefillsDone()
	f.waitEnginesIdle()
	return prefill
}

// activeLoad reads the load gauges (its prefill tokens, its decode
// blocks) of rank 0 of w's engine, named by its URL and role.
func (f *fleet) activeLoad(w *kvrpb.SelectWorker, role string) (prefill, decode float64) {
	m := f.node.Metrics()
	return testutil.ToFloat64(m.WorkerActivePrefillTokens.WithLabelValues(w.GetUrl(), "0", role)),
		testutil.ToFloat64(m.WorkerActiveDecodeBlocks.WithLabelValues(w.GetUrl(), "0", role))
}

// TestSelectDisaggPair: Select of a disaggregated model names the decode
// engine and, as prefill_worker, the prefill engine caching the prompt,
// with its endpoint and SGLang bootstrap port; Reserve books both on the
// same engines, PrefillComplete ends the prefill hop's load and Release
// the decode hop's; SelectAndReserve books a pair too, and the HTTP
// mirror carries prefillWorker.
func TestSelectDisaggPair(t *testing.T) {
	f := selectDisaggFleet(t)
	prompt := seq(1000, 256)
	prefill := f.cachedPrefill(prompt)
	c := selectClient(t, f)
	ctx := context.Background()
	// The cached prefix and a new tail, which the prefill hop books.
	in := &kvrpb.SelectRequest{Model: model, Prompt: idsPrompt(append(seq(1000, 240), seq(90000, 64)...))}
	sel, err := c.Select(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	p, d := sel.GetPrefillWorker(), sel.GetWorker()
	if p == nil || !strings.HasPrefix(prefill, strconv.FormatUint(p.GetEngineId(), 10)+"/") || p.GetEndpoint() == "" ||
		p.GetBootstrapPort() == 0 || p.GetDpSize() != 1 {
		t.Fatalf("prefill worker %v, want the caching engine %s with its bootstrap port", p, prefill)
	}
	if id := d.GetEngineId(); (id != 3 && id != 4) || d.GetEndpoint() == "" || d.GetBootstrapPort() != 0 {
		t.Fatalf("decode worker %v", d)
	}
	res, err := c.Reserve(ctx, &kvrpb.SelectReserveRequest{SelectionId: sel.GetSelectionId()})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetPrefillWorker().GetEngineId() != p.GetEngineId() || res.GetWorker().GetEngineId() != d.GetEngineId() {
		t.Fatalf("reserved %v / %v, selected %v / %v", res.GetPrefillWorker(), res.GetWorker(), p, d)
	}
	if pt, _ := f.activeLoad(p, "prefill"); pt <= 0 {
		t.Fatalf("prefill engine's booked prefill tokens %v", pt)
	}
	if _, db := f.activeLoad(d, "decode"); db <= 0 {
		t.Fatalf("decode engine's booked blocks %v", db)
	}
	if _, err := c.PrefillComplete(ctx, &kvrpb.SelectReservationRef{ReservationId: res.GetReservationId()}); err != nil {
		t.Fatal(err)
	}
	if pt, _ := f.activeLoad(p, "prefill"); pt != 0 {
		t.Fatalf("prefill engine's booked prefill tokens %v after PrefillComplete", pt)
	}
	if _, err := c.Release(ctx, &kvrpb.SelectReleaseRequest{ReservationId: res.GetReservationId()}); err != nil {
		t.Fatal(err)
	}
	if _, db := f.activeLoad(d, "decode"); db != 0 {
		t.Fatalf("decode engine's booked blocks %v after Release", db)
	}
	both, err := c.SelectAndReserve(ctx, in)
	if err != nil || both.GetPrefillWorker().GetEngineId() != p.GetEngineId() {
		t.Fatalf("SelectAndReserve: %v, %v", both, err)
	}
	if _, err := c.Release(ctx, &kvrpb.SelectReleaseRequest{ReservationId: both.GetReservationId()}); err != nil {
		t.Fatal(err)
	}
	resp, out := f.postJSON("/v1/select", `{"model":"`+model+`","tokens":{"ids":[1,2,3,4]}}`)
	var got struct {
		PrefillWorker struct {
			Endpoint      string
			BootstrapPort uint32 `json:"bootstrapPort"`
		} `json:"prefillWorker"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(out), &got) != nil || got.PrefillWorker.Endpoint == "" ||
		got.PrefillWorker.BootstrapPort == 0 {
		t.Fatalf("POST /v1/select: %d %s", resp.StatusCode, out)
	}
	f.waitReservations(0)
}

// TestSelectDisaggPrefillUnreachable: a pair released as its prefill
// engine's failure leaves that engine out, and the next Select of the
// same prompt prefills on the other prefill engine.
func TestSelectDisaggPrefillUnreachable(t *testing.T) {
	f := selectDisaggFleet(t)
	f.cachedPrefill(seq(1000, 256))
	c := selectClient(t, f)
	ctx := context.Background()
	in := &kvrpb.SelectRequest{Model: model, Prompt: tokenPrompt(1000, 256)}
	res, err := c.SelectAndReserve(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Release(ctx, &kvrpb.SelectReleaseRequest{ReservationId: res.GetReservationId(),
		Outcome: kvrpb.SelectOutcome_SELECT_OUTCOME_PREFILL_UNREACHABLE}); err != nil {
		t.Fatal(err)
	}
	sel, err := c.Select(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if got, was := sel.GetPrefillWorker().GetEngineId(), res.GetPrefillWorker().GetEngineId(); got == was || got == 0 {
		t.Fatalf("prefill on engine %d after engine %d was reported unreachable", got, was)
	}
}

func idsPrompt(tokens []int) *kvrpb.SelectRequest_Tokens {
	ids := make([]uint32, len(tokens))
	for i, t := range tokens {
		ids[i] = uint32(t)
	}
	return &kvrpb.SelectRequest_Tokens{Tokens: &kvrpb.SelectTokens{Ids: ids}}
}
