package frontend

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// TestSelectRequestsLikeTheFrontend: the request builder of the other
// edges reads an OpenAI body, its session headers, pins and hints as the
// frontend does, and refuses what it refuses.
func TestSelectRequestsLikeTheFrontend(t *testing.T) {
	q, err := NewRequests(Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Session-Id", "s1")
	h.Set(PriorityHeader, "3")
	body := []byte(`{"model":"m","prompt":[1,2,3],"user":"u","nvext":{"agent_hints":{"osl":40}}}`)
	req, release, err := q.OpenAI("r1", oaiedge.Completions, body, h, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "m" || len(req.Tokens) != 3 || req.SessionID != "s1" || req.Priority != 3 || req.OutputTokens != 40 {
		t.Errorf("request %+v", req)
	}
	release()

	pin := http.Header{}
	pin.Set("X-Worker-Instance-Id", "7")
	osl := int64(5)
	req, err = q.Prompt("r2", Prompt{Model: "m", Text: "hello", Hints: NVExt{AgentHints: AgentHints{OSL: &osl}}}, pin, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if req.Text != "hello" || req.Pin == nil || req.Pin.Engine != 7 || req.OutputTokens != 5 {
		t.Errorf("request %+v", req)
	}

	bad := int64(-1)
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{name: "malformed body", want: oaiedge.ErrMalformed, run: func() error {
			_, _, err := q.OpenAI("r", oaiedge.Chat, []byte(`{"model":`), nil, time.Time{})
			return err
		}},
		{name: "bad hint", want: oaiedge.ErrInvalid, run: func() error {
			_, err := q.Prompt("r", Prompt{Model: "m", Text: "x", Hints: NVExt{AgentHints: AgentHints{OSL: &bad}}}, nil, time.Time{})
			return err
		}},
		{name: "prompt too long", want: dispatch.ErrPromptTooLong, run: func() error {
			_, err := q.Prompt("r", Prompt{Model: "m", Tokens: make([]uint32, oaiedge.MaxPromptTokens+1)}, nil, time.Time{})
			return err
		}},
		{name: "bad pin", want: oaiedge.ErrInvalid, run: func() error {
			h := http.Header{}
			h.Set("X-Worker-Instance-Id", "x")
			_, err := q.Prompt("r", Prompt{Model: "m", Text: "x"}, h, time.Time{})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
