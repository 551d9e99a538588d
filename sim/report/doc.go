// Package report writes a simulation's comparison as a self-contained HTML
// page with SVG charts, drawn with gonum.org/v1/plot: the TTFT
// distribution of every policy, hit ratio over time, each engine's load
// and cache occupancy over time, and every policy's share of the three
// references (infinite cache, pooled capacity, clairvoyant placement).
//
// The page needs no network: the charts are inline SVG and there is no
// script or stylesheet to fetch. WriteHTML also writes each chart as its
// own SVG file beside the page, for documents that embed one. Anything
// that has sim.Results (the `kvrouter sim --report` flag, a live demo)
// can call it.
//
// Concurrency. WriteHTML keeps no state; concurrent calls must write to
// different directories.
package report
