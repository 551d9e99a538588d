package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// TestMapSessionErr: the replicated store's refusals reach the dispatcher
// under its own sentinels, so that the edges' tables answer them.
func TestMapSessionErr(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{name: "session limit", err: consensus.ErrSessionLimit, want: dispatch.ErrSessionLimit},
		{name: "disk full", err: consensus.ErrDiskFull, want: dispatch.ErrStoreFull},
		{name: "disk full forwarded", err: fmt.Errorf("%w: leader said: x", consensus.ErrDiskFull), want: dispatch.ErrStoreFull},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mapSessionErr(tc.err)
			if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
				t.Fatalf("mapped %v to %v", tc.err, got)
			}
		})
	}
	if mapSessionErr(nil) != nil {
		t.Fatal("nil mapped to an error")
	}
}
