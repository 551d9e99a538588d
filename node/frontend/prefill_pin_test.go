package frontend

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// TestPrefillPinHeaders: the reference router's prefill pin headers (and
// their unprefixed aliases) name the prefill engine and rank, beside the
// engine pin; its unset-rank value means any rank; a rank without an
// engine is refused naming the header.
func TestPrefillPinHeaders(t *testing.T) {
	tests := []struct {
		name         string
		headers      map[string]string
		pin, prefill *dispatch.Pin
		err          string
	}{
		{name: "prefill engine", headers: map[string]string{"x-dynamo-prefill-instance-id": "7"},
			prefill: &dispatch.Pin{Engine: 7, AnyRank: true}},
		{name: "prefill engine and rank, decode engine", headers: map[string]string{"x-dynamo-prefill-instance-id": "7",
			"x-dynamo-prefill-dp-rank": "1", "x-dynamo-worker-instance-id": "9"},
			pin: &dispatch.Pin{Engine: 9, AnyRank: true}, prefill: &dispatch.Pin{Engine: 7, Rank: 1}},
		{name: "aliases", headers: map[string]string{"x-prefill-instance-id": "7", "x-prefill-dp-rank": "2", "x-dp-rank": "1",
			"x-worker-instance-id": "9"}, pin: &dispatch.Pin{Engine: 9, Rank: 1}, prefill: &dispatch.Pin{Engine: 7, Rank: 2}},
		{name: "unset rank", headers: map[string]string{"x-dynamo-prefill-instance-id": "7", "x-dynamo-prefill-dp-rank": "4294967295"},
			prefill: &dispatch.Pin{Engine: 7, AnyRank: true}},
		{name: "rank without engine", headers: map[string]string{"x-dynamo-prefill-dp-rank": "1"}, err: "X-Dynamo-Prefill-Dp-Rank"},
		{name: "bad engine", headers: map[string]string{"x-prefill-instance-id": "p1"}, err: "X-Prefill-Instance-Id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			si, err := readSession(oaiedge.SessionKeys{}, h, nil)
			if tc.err != "" {
				if !errors.Is(err, oaiedge.ErrInvalid) || oaiedge.ParamOf(err) != tc.err {
					t.Fatalf("err %v (param %q), want param %q", err, oaiedge.ParamOf(err), tc.err)
				}
				return
			}
			if err != nil || !samePin(si.Pin, tc.pin) || !samePin(si.PrefillPin, tc.prefill) {
				t.Fatalf("pins %+v / %+v, %v; want %+v / %+v", si.Pin, si.PrefillPin, err, tc.pin, tc.prefill)
			}
		})
	}
}

// TestPrefillPinReachesTheRoutingRequest: nvext.prefill_worker_id and
// prefill_dp_rank pin the prefill engine as the headers do; a header
// naming another engine, or a rank without an engine, is a 400 naming
// the field.
func TestPrefillPinReachesTheRoutingRequest(t *testing.T) {
	ts, r, _ := setup(t, Config{}, nil)
	status, _, body := postChat(t, ts, chatWithNVExt(`{"prefill_worker_id":7,"prefill_dp_rank":1,"decode_worker_id":9}`),
		map[string]string{"x-dynamo-prefill-instance-id": "7", "x-dynamo-prefill-dp-rank": "1"})
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	got := r.lastRequest(t)
	if !samePin(got.PrefillPin, &dispatch.Pin{Engine: 7, Rank: 1}) || !samePin(got.Pin, &dispatch.Pin{Engine: 9, AnyRank: true}) {
		t.Fatalf("routed pins %+v / %+v", got.Pin, got.PrefillPin)
	}
	for _, tc := range []struct {
		nvext string
		hdr   map[string]string
		param string
	}{
		{`{"prefill_worker_id":7}`, map[string]string{"x-dynamo-prefill-instance-id": "8"}, "nvext.prefill_worker_id"},
		{`{"prefill_dp_rank":1}`, nil, "nvext.prefill_dp_rank"},
	} {
		status, _, body := postChat(t, ts, chatWithNVExt(tc.nvext), tc.hdr)
		var e struct {
			Error struct{ Param string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if status != 400 || e.Error.Param != tc.param {
			t.Errorf("%s: status %d param %q, want 400 naming %q", tc.nvext, status, e.Error.Param, tc.param)
		}
	}
}

func samePin(a, b *dispatch.Pin) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
