//go:build unix

package vllmevents

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) of the whole process: the
// ZMQ benchmark's publisher, subscriber, sockets and GC alike. On a shared
// two-core machine wall time also counts the time other processes hold
// the cores, so the benchmarks report work per CPU-second beside it.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
