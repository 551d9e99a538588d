package extproc

import (
	"errors"
	"testing"
)

// TestExtProcOverloadStatusMustBeEnvoys: Envoy's ImmediateResponse takes
// only the statuses it defines, so 529 is refused at configuration and
// an undefined status in a class is answered as the nearest defined one.
func TestExtProcOverloadStatusMustBeEnvoys(t *testing.T) {
	if err := (Config{OverloadStatus: 529}).withDefaults().Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("overload status 529: %v", err)
	}
	if err := (Config{}).withDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for in, want := range map[int]int32{429: 429, 503: 503, 499: 400, 529: 503} {
		if got := int32(envoyStatus(in)); got != want {
			t.Errorf("envoyStatus(%d) = %d, want %d", in, got, want)
		}
	}
}
