package extproc

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
)

// nextID and idSuffix make the picker's own request ids unique within
// the process and across nodes and restarts.
var (
	nextID   atomic.Uint64
	idSuffix = func() string {
		var b [6]byte
		_, _ = rand.Read(b[:])
		return "-" + hex.EncodeToString(b[:])
	}()
)
