package report

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/kvrouter/kvrouter/sim"
)

// Chart size: wide enough for a legend beside eight engines' lines.
const (
	chartWidth  = 7 * vg.Inch
	chartHeight = 3.5 * vg.Inch
	// hitWindow is the width of the hit-ratio-over-time buckets.
	hitWindow = time.Minute
)

// render writes p as SVG.
func render(p *plot.Plot) ([]byte, error) {
	w, err := p.WriterTo(chartWidth, chartHeight, "svg")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds one named series in the i-th color.
func addLine(p *plot.Plot, i int, name string, xys plotter.XYs) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// ttftCDF is the distribution of TTFT per policy, on a log time axis.
func ttftCDF(rs []sim.Result) ([]byte, error) {
	p := newPlot("TTFT distribution", "time to first token (ms, log scale)", "share of requests")
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	for i, r := range rs {
		ms := make([]float64, 0, len(r.Detail.Decisions))
		for _, d := range r.Detail.Decisions {
			ms = append(ms, max(float64(d.TTFT)/float64(time.Millisecond), 0.1))
		}
		slices.Sort(ms)
		step := max(1, len(ms)/400) // a few hundred points draw the curve
		var xys plotter.XYs
		for k := 0; k < len(ms); k += step {
			xys = append(xys, plotter.XY{X: ms[k], Y: float64(k+1) / float64(len(ms))})
		}
		if n := len(ms); n > 0 {
			xys = append(xys, plotter.XY{X: ms[n-1], Y: 1})
		}
		if err := addLine(p, i, r.Policy, xys); err != nil {
			return nil, err
		}
	}
	return render(p)
}

// hitsOverTime is each policy's block hit ratio per minute of arrivals.
func hitsOverTime(rs []sim.Result) ([]byte, error) {
	p := newPlot("Hit ratio over time", "arrival (minutes)", "hit ratio")
	for i, r := range rs {
		var hits, blocks []float64
		for _, d := range r.Detail.Decisions {
			k := int(d.At / hitWindow)
			for len(hits) <= k {
				hits, blocks = append(hits, 0), append(blocks, 0)
			}
			hits[k] += float64(d.Hit)
			blocks[k] += float64(d.Blocks)
		}
		var xys plotter.XYs
		for k := range hits {
			if blocks[k] > 0 {
				xys = append(xys, plotter.XY{X: float64(k) + 0.5, Y: hits[k] / blocks[k]})
			}
		}
		if err := addLine(p, i, r.Policy, xys); err != nil {
			return nil, err
		}
	}
	p.Y.Min, p.Y.Max = 0, 1
	return render(p)
}

// perEngine draws one line per engine of a figure of the timeline.
func perEngine(r *sim.Result, title, y string, f func(s *sim.Sample, e int) float64) ([]byte, error) {
	p := newPlot(title, "time (s)", y)
	tl := r.Detail.Timeline
	if len(tl) == 0 {
		return render(p)
	}
	for e := range tl[0].Load {
		xys := make(plotter.XYs, len(tl))
		for k := range tl {
			xys[k] = plotter.XY{X: tl[k].At.Seconds(), Y: f(&tl[k], e)}
		}
		if err := addLine(p, e, fmt.Sprintf("engine %d", e+1), xys); err != nil {
			return nil, err
		}
	}
	return render(p)
}

func engineLoad(r *sim.Result) ([]byte, error) {
	return perEngine(r, "Engine load ("+r.Policy+")", "requests queued or running", func(s *sim.Sample, e int) float64 {
		return float64(s.Load[e].Waiting + s.Load[e].Running)
	})
}

func occupancy(r *sim.Result) ([]byte, error) {
	b, err := perEngine(r, "Cache occupancy ("+r.Policy+")", "cached blocks / capacity", func(s *sim.Sample, e int) float64 {
		l := s.Load[e]
		if l.KVTotalBlocks == 0 {
			return 0
		}
		return float64(l.KVCachedBlocks) / float64(l.KVTotalBlocks)
	})
	return b, err
}

// shares is a grouped bar chart: per policy, its share of each reference.
func shares(rs []sim.Result) ([]byte, error) {
	p := newPlot("Share of each reference", "", "policy hit ratio / reference")
	refs := []struct {
		name string
		of   func(*sim.Result) float64
	}{
		{"infinite cache", func(r *sim.Result) float64 { return r.HitOfBound }},
		{"pooled capacity", func(r *sim.Result) float64 { return r.HitOfPooled }},
		{"clairvoyant placement", func(r *sim.Result) float64 { return r.HitOfOracle }},
	}
	w := vg.Points(14)
	names := make([]string, len(rs))
	for i := range rs {
		names[i] = rs[i].Policy
	}
	for k, ref := range refs {
		vs := make(plotter.Values, len(rs))
		for i := range rs {
			vs[i] = ref.of(&rs[i])
		}
		b, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return nil, err
		}
		b.Color, b.LineStyle.Width = plotutil.Color(k), 0
		b.Offset = vg.Length(k-1) * w
		p.Add(b)
		p.Legend.Add(ref.name, b)
	}
	p.NominalX(names...)
	p.Y.Min = 0
	return render(p)
}
