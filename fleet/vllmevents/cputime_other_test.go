//go:build !unix

package vllmevents

import "time"

// processCPU is not measured off Unix.
func processCPU() (time.Duration, bool) { return 0, false }
