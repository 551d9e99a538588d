package report

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"os"
	"path/filepath"

	"github.com/kvrouter/kvrouter/sim"
)

// ErrNoResults is returned for a report without results.
var ErrNoResults = errors.New("report: no results")

// Inputs is what a report shows.
type Inputs struct {
	// Title names the workload and fleet, e.g. "chat.jsonl, 8 engines".
	Title string
	// Results are the policies' results, as sim.Compare returns them;
	// the per-engine charts show the recommended policy's replay, or the
	// first one's.
	Results []sim.Result
}

// Chart file names, also the order of the page.
const (
	ChartTTFT      = "ttft-cdf.svg"
	ChartHits      = "hit-ratio-over-time.svg"
	ChartLoad      = "engine-load.svg"
	ChartOccupancy = "cache-occupancy.svg"
	ChartShares    = "reference-shares.svg"
)

// chart is one drawn chart.
type chart struct {
	File, Caption string
	SVG           template.HTML
}

// WriteHTML writes index.html and one SVG file per chart to dir, creating
// it if needed.
func WriteHTML(dir string, in Inputs) error {
	if len(in.Results) == 0 {
		return ErrNoResults
	}
	charts, err := draw(in)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range charts {
		if err := os.WriteFile(filepath.Join(dir, c.File), []byte(c.SVG), 0o644); err != nil {
			return err
		}
	}
	var page bytes.Buffer
	if err := pageTemplate.Execute(&page, struct {
		Title   string
		Results []sim.Result
		Charts  []chart
	}{in.Title, in.Results, charts}); err != nil {
		return fmt.Errorf("report: page: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "index.html"), page.Bytes(), 0o644)
}

// draw renders every chart.
func draw(in Inputs) ([]chart, error) {
	focus := focusResult(in.Results)
	makers := []struct {
		file, caption string
		svg           func() ([]byte, error)
	}{
		{ChartTTFT, "Time to first token: share of requests served within each time, per policy.", func() ([]byte, error) { return ttftCDF(in.Results) }},
		{ChartHits, "Prefix-cache hit ratio of the requests arriving in each minute, per policy.", func() ([]byte, error) { return hitsOverTime(in.Results) }},
		{ChartLoad, fmt.Sprintf("Requests queued or running on each engine over time (%s).", focus.Policy), func() ([]byte, error) { return engineLoad(focus) }},
		{ChartOccupancy, fmt.Sprintf("Share of each engine's KV capacity holding cached prefixes over time (%s).", focus.Policy), func() ([]byte, error) { return occupancy(focus) }},
		{ChartShares, "Each policy's hit ratio as a share of the three references.", func() ([]byte, error) { return shares(in.Results) }},
	}
	out := make([]chart, 0, len(makers))
	for _, m := range makers {
		b, err := m.svg()
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", m.file, err)
		}
		out = append(out, chart{File: m.file, Caption: m.caption, SVG: inline(b)})
	}
	return out, nil
}

// inline is an SVG document without its XML declaration, which HTML does
// not allow inside a page. The SVG is ours, drawn from numbers and policy
// names, so it is trusted as HTML.
func inline(svg []byte) template.HTML {
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	return template.HTML(svg)
}

// focusResult is the result the per-engine charts show.
func focusResult(rs []sim.Result) *sim.Result {
	for i := range rs {
		if rs[i].Recommended {
			return &rs[i]
		}
	}
	return &rs[0]
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct": func(x float64) float64 { return 100 * x },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kvrouter sim: {{.Title}}</title>
<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}
th:first-child,td:first-child{text-align:left}figure{margin:2em 0}</style></head><body>
<h1>kvrouter sim</h1><p>{{.Title}}</p>
<table><tr><th>policy</th><th>hit ratio</th><th>of infinite</th><th>of pooled</th><th>of oracle</th>
<th>TTFT mean ms</th><th>TTFT p99 ms</th><th>load max/mean</th></tr>
{{range .Results}}<tr><td>{{.Policy}}{{if .Recommended}} (recommended){{end}}</td><td>{{printf "%.3f" .HitRatio}}</td>
<td>{{printf "%.0f%%" (pct .HitOfBound)}}</td><td>{{printf "%.0f%%" (pct .HitOfPooled)}}</td><td>{{printf "%.0f%%" (pct .HitOfOracle)}}</td>
<td>{{printf "%.0f" .TTFTMeanMs}}</td><td>{{printf "%.0f" .TTFTP99Ms}}</td><td>{{printf "%.2f" .LoadMaxOverMean}}</td></tr>
{{end}}</table>
{{with index .Results 0}}<p>References: infinite cache {{printf "%.3f" .BoundHitRatio}}, pooled LRU of the fleet's capacity {{printf "%.3f" .PooledHitRatio}}, clairvoyant placement {{printf "%.3f" .OracleHitRatio}}.</p>{{end}}
{{range .Charts}}<figure>{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</body></html>
`))
