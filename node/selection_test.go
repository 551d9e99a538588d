package node_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// selectFleet is a fleet whose node serves the selection API and the
// endpoint picker on loopback, with session affinity on.
func selectFleet(t *testing.T, engines int, tweak func(*node.Config)) *fleet {
	return startFleet(t, engines, func(c *node.Config) {
		c.Selection.Addr, c.Selection.ExtProcAddr = "127.0.0.1:0", "127.0.0.1:0"
		c.Dispatch.AffinityTTL = time.Minute
		if tweak != nil {
			tweak(c)
		}
	})
}

// dial is a gRPC client of addr, closed with the test.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func selectClient(t *testing.T, f *fleet) kvrpb.SelectionClient {
	return kvrpb.NewSelectionClient(dial(t, f.node.SelectAddr().String()))
}

func tokenPrompt(start, n int) *kvrpb.SelectRequest_Tokens {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(start + i)
	}
	return &kvrpb.SelectRequest_Tokens{Tokens: &kvrpb.SelectTokens{Ids: ids}}
}

// TestSelectAPIDecidesAndReserves: Select names an engine with its
// endpoint and cost breakdown and books nothing; SelectAndReserve and
// Reserve book until Release, which is idempotent.
func TestSelectAPIDecidesAndReserves(t *testing.T) {
	f := selectFleet(t, 2, nil)
	c := selectClient(t, f)
	ctx := context.Background()
	sel, err := c.Select(ctx, &kvrpb.SelectRequest{Model: model, Prompt: tokenPrompt(1, 256)})
	if err != nil {
		t.Fatal(err)
	}
	w := sel.GetWorker()
	if w.GetEndpoint() == "" || !strings.Contains(w.GetUrl(), w.GetEndpoint()) || len(sel.GetCandidates()) != 2 || sel.GetSelectionId() == "" {
		t.Fatalf("selection %v", sel)
	}
	if sel.GetBlocks() != 256/16 || sel.GetBlockSize() != 16 {
		t.Errorf("blocks %d at block size %d", sel.GetBlocks(), sel.GetBlockSize())
	}
	res, err := c.Reserve(ctx, &kvrpb.SelectReserveRequest{SelectionId: sel.GetSelectionId()})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetWorker().GetEngineId() != w.GetEngineId() || res.GetReservationId() == "" {
		t.Fatalf("reservation %v of selection %v", res, sel)
	}
	if _, err := c.Reserve(ctx, &kvrpb.SelectReserveRequest{SelectionId: sel.GetSelectionId()}); status.Code(err) != codes.NotFound {
		t.Errorf("second Reserve of one selection: %v, want NOT_FOUND", err)
	}
	both, err := c.SelectAndReserve(ctx, &kvrpb.SelectRequest{Model: model, Prompt: &kvrpb.SelectRequest_Text{Text: "hello there"}})
	if err != nil {
		t.Fatal(err)
	}
	f.waitReservations(2)
	if _, err := c.PrefillComplete(ctx, &kvrpb.SelectReservationRef{ReservationId: both.GetReservationId()}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{res.GetReservationId(), both.GetReservationId()} {
		if out, err := c.Release(ctx, &kvrpb.SelectReleaseRequest{ReservationId: id}); err != nil || !out.GetFound() {
			t.Fatalf("Release(%s): %v, %v", id, out, err)
		}
	}
	if out, err := c.Release(ctx, &kvrpb.SelectReleaseRequest{ReservationId: both.GetReservationId()}); err != nil || out.GetFound() {
		t.Fatalf("second Release: %v, %v; want found=false and no error", out, err)
	}
	f.waitReservations(0)
}

// waitReservations waits until the node's selection edges hold n
// reservations.
func (f *fleet) waitReservations(n float64) {
	f.t.Helper()
	f.waitMetric("kvrouter_selection_reservations", n)
}

// waitMetric waits until an unlabelled gauge or counter of the node (by
// its name, constant labels aside) reads want.
func (f *fleet) waitMetric(name string, want float64) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := metricValue(f.t, f.node, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s = %v, want %v", name, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func metricValue(t *testing.T, n *node.Node, name string) float64 {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestSelectSessionSticksThroughRaftFreeNode: a session's Selects go to
// one engine, the second by its binding.
func TestSelectSessionSticks(t *testing.T) {
	f := selectFleet(t, 3, nil)
	c := selectClient(t, f)
	h := map[string]string{"x-session-id": "agent-7"}
	first, err := c.Select(context.Background(), &kvrpb.SelectRequest{Model: model, Prompt: tokenPrompt(1, 64), Headers: h})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		next, err := c.Select(context.Background(), &kvrpb.SelectRequest{Model: model, Prompt: tokenPrompt(5000*(i+1), 64), Headers: h})
		if err != nil {
			t.Fatal(err)
		}
		if next.GetWorker().GetEngineId() != first.GetWorker().GetEngineId() || !next.GetSessionBound() || next.GetReason() != "session" {
			t.Fatalf("select %d: %v, want engine %d by session", i, next, first.GetWorker().GetEngineId())
		}
	}
}

// TestSelectBadInputGetsTypedStatus: refusals are typed gRPC statuses,
// and 4xx OpenAI bodies on the HTTP mirror.
func TestSelectBadInputGetsTypedStatus(t *testing.T) {
	f := selectFleet(t, 1, nil)
	c := selectClient(t, f)
	tests := []struct {
		name string
		in   *kvrpb.SelectRequest
		want codes.Code
	}{
		{name: "no prompt", in: &kvrpb.SelectRequest{Model: model}, want: codes.InvalidArgument},
		{name: "empty tokens", in: &kvrpb.SelectRequest{Model: model, Prompt: &kvrpb.SelectRequest_Tokens{Tokens: &kvrpb.SelectTokens{}}}, want: codes.InvalidArgument},
		{name: "no model", in: &kvrpb.SelectRequest{Prompt: tokenPrompt(1, 16)}, want: codes.InvalidArgument},
		{name: "unknown model", in: &kvrpb.SelectRequest{Model: "nope", Prompt: tokenPrompt(1, 16)}, want: codes.NotFound},
		{name: "malformed openai body", in: &kvrpb.SelectRequest{Prompt: &kvrpb.SelectRequest_Openai{Openai: &kvrpb.SelectOpenAI{Body: []byte(`{"model":`)}}}, want: codes.InvalidArgument},
		{name: "unknown openai path", in: &kvrpb.SelectRequest{Prompt: &kvrpb.SelectRequest_Openai{Openai: &kvrpb.SelectOpenAI{Path: "/v1/nope", Body: []byte(`{}`)}}}, want: codes.InvalidArgument},
		{name: "bad pin header", in: &kvrpb.SelectRequest{Model: model, Prompt: tokenPrompt(1, 16), Headers: map[string]string{"X-Worker-Instance-Id": "x"}}, want: codes.InvalidArgument},
		{name: "bad request id", in: &kvrpb.SelectRequest{RequestId: "a b", Model: model, Prompt: tokenPrompt(1, 16)}, want: codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Select(context.Background(), tc.in); status.Code(err) != tc.want {
				t.Fatalf("Select: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := c.Reserve(context.Background(), &kvrpb.SelectReserveRequest{SelectionId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("Reserve of an unknown selection: %v", err)
	}
	for _, body := range []string{`{"model":`, `{"nope":1}`, `{"model":"` + model + `"}`} {
		resp, out := f.postJSON("/v1/select", body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, `"error"`) {
			t.Errorf("POST /v1/select %s: %d %s", body, resp.StatusCode, out)
		}
	}
}

// TestSelectHTTPMirror: the HTTP/JSON mirror answers as the gRPC service,
// in protobuf's JSON mapping, and ends reservations with DELETE.
func TestSelectHTTPMirror(t *testing.T) {
	f := selectFleet(t, 2, nil)
	resp, out := f.postJSON("/v1/select_and_reserve", `{"model":"`+model+`","openai":{"path":"/v1/chat/completions",`+
		`"body":"`+b64(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)+`"},"headers":{"X-Session-Id":"s1"}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("select_and_reserve: %d %s", resp.StatusCode, out)
	}
	var got struct {
		Worker        struct{ Endpoint string }
		ReservationID string `json:"reservationId"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Worker.Endpoint == "" || got.ReservationID == "" {
		t.Fatalf("answer %s: %v", out, err)
	}
	f.waitReservations(1)
	// An outcome that is not one of the four names (in lower case) is
	// refused with a 400 naming the parameter, and the reservation stays.
	for _, bad := range []string{"FAILED", "failure", "select_outcome_failed"} {
		req, _ := http.NewRequest(http.MethodDelete, f.base+"/v1/reservations/"+got.ReservationID+"?outcome="+bad, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error struct{ Param string } }
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Param != "outcome" {
			t.Errorf("DELETE ?outcome=%s: %d %s, want 400 naming outcome", bad, resp.StatusCode, b)
		}
	}
	if n := metricValue(t, f.node, "kvrouter_selection_reservations"); n != 1 {
		t.Fatalf("a refused release ended the reservation: %v held", n)
	}
	req, _ := http.NewRequest(http.MethodDelete, f.base+"/v1/reservations/"+got.ReservationID+"?outcome=failed", nil)
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", dresp.StatusCode)
	}
	f.waitReservations(0)
}

// TestSelectReservationsExpire: a reservation never released is freed at
// its TTL and counted.
func TestSelectReservationsExpire(t *testing.T) {
	f := selectFleet(t, 1, func(c *node.Config) { c.Selection.API.ReservationTTL = 50 * time.Millisecond })
	c := selectClient(t, f)
	if _, err := c.SelectAndReserve(context.Background(), &kvrpb.SelectRequest{Model: model, Prompt: tokenPrompt(1, 64)}); err != nil {
		t.Fatal(err)
	}
	f.waitMetric("kvrouter_selection_reservations_expired_total", 1)
	f.waitReservations(0)
}

func (f *fleet) postJSON(path, body string) (*http.Response, string) {
	f.t.Helper()
	resp, err := http.Post(f.base+path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func b64(s string) string {
	return base64.StdEncoding.EncodeToString([]byte(s))
}
