package index

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPU is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPU = 3

// threadCPU returns the CPU time consumed by the calling OS thread. The
// benchmarks lock their goroutine to a thread and report CPU time beside
// wall time, because on a shared two-core machine wall time also counts
// the time other processes hold the cores.
func threadCPU() (time.Duration, bool) {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPU, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// lockThread pins the benchmark goroutine so that threadCPU measures it.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
