package service

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/relay/consumer"
)

// laneCollector exports the state of every remote pool's summary lane,
// read at scrape time: how stale each DC's summary is decides whether the
// gateway still trusts it (max_staleness), so it is what an operator
// alerts on.
type laneCollector struct {
	lanes            func(now time.Time) []consumer.LaneStatus
	staleness, ready *prometheus.Desc
}

func newLaneCollector(lanes func(time.Time) []consumer.LaneStatus) *laneCollector {
	labels := []string{"peer_dc", "model"}
	return &laneCollector{lanes: lanes,
		staleness: prometheus.NewDesc("kvrouter_relay_summary_staleness_seconds",
			"Time since the remote pool's summary last heard from its DC (snapshot, delta or heartbeat); +Inf before the first.", labels, nil),
		ready: prometheus.NewDesc("kvrouter_relay_summary_ready",
			"1 while the remote pool's summary holds a complete snapshot.", labels, nil),
	}
}

func (c *laneCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.staleness; ch <- c.ready }

func (c *laneCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.lanes(time.Now()) {
		ready := 0.0
		if l.Ready {
			ready = 1
		}
		// A summary never heard from is as stale as can be, not fresh.
		stale := math.Inf(1)
		if !l.Heard.IsZero() {
			stale = l.Staleness.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.staleness, prometheus.GaugeValue, stale, l.Pool.DC, l.Pool.Model)
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready, l.Pool.DC, l.Pool.Model)
	}
}
