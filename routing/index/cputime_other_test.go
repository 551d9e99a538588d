//go:build !linux

package index

import "time"

// threadCPU is unavailable off Linux; the CPU-time metrics are skipped.
func threadCPU() (time.Duration, bool) { return 0, false }

func lockThread() func() { return func() {} }
