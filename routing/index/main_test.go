package index

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when goroutines started by the tests outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
