package consensus

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDiskFullStatus: a full leader's refusal crosses the forwarding API
// as ResourceExhausted and comes back as ErrDiskFull (nothing proposed,
// retryable), not as an indeterminate outcome.
func TestDiskFullStatus(t *testing.T) {
	err := toStatus(ErrDiskFull)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("code %v, want ResourceExhausted", status.Code(err))
	}
	back := fromStatus(err)
	if !errors.Is(back, ErrDiskFull) || errors.Is(back, ErrIndeterminate) || !Retryable(back) {
		t.Fatalf("mapped back to %v", back)
	}
	if got := status.Code(adminStatus(ErrDiskFull)); got != codes.ResourceExhausted {
		t.Fatalf("membership change on a full leader: %v", got)
	}
}
