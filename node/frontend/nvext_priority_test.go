package frontend

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

func FuzzNVExtPriority(f *testing.F) {
	f.Add([]byte(`{"nvext":{"agent_hints":{"priority":3}}}`))
	f.Add([]byte(`{"nvext":{"agent_hints":{"priority":-1e400}}}`))
	f.Add([]byte(`{"nvext":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := nvextPriority(body)
		if err != nil {
			if !errors.Is(err, oaiedge.ErrInvalid) {
				t.Fatalf("refusal without ErrInvalid: %v", err)
			}
			return
		}
		if !(p >= 0) || p > 86400 {
			t.Fatalf("accepted priority %v", p)
		}
	})
}
