package loadgen

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"
)

// The HTML report: one self-contained page (inline CSS and SVG, no
// scripts, nothing fetched) with the summary, latency and throughput over
// time, the latency percentile distribution, CPU over time for spawned
// brokers, the capacity search when there was one, and the configuration.

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"inc":  func(i int) int { return i + 1 },
	"join": strings.Join,
	"num":  func(v float64) string { return commas(v, 0) },
	"pct":  func(v float64) string { return fmt.Sprintf("%.1f %%", 100*v) },
	"devMBs": func(d *DeviceTraffic, secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(d.WriteBytes) / 1e6 / secs
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>strata loadgen report</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1060px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #555; margin: 2px 0; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { padding: 3px 12px 3px 0; text-align: left; font-size: 14px; }
td.n, th.n { text-align: right; }
.note { background: #fff6d8; padding: 6px 10px; margin: 8px 0; }
.bad { color: #b00; } .good { color: #070; }
figure { margin: 12px 0; }
</style></head><body>
<h1>strata loadgen — {{.R.Result.Engine}} engine</h1>
<p class="sub">{{.Target}}</p>
<p class="sub">{{.R.Workload}}</p>
<p class="sub">generated {{.When}}{{with .R.StrataVersion}} by strata {{.}}{{end}}{{with .R.StartedAt}}; run started {{.}}{{end}}</p>
<p class="sub">host: {{.HostLine}}</p>
{{range .R.Notes}}<p class="note">{{.}}</p>{{end}}
<h2>Summary</h2>
<table>
<tr><th></th><th class="n">value</th></tr>
{{range .Summary}}<tr><td>{{.K}}</td><td class="n">{{.V}}</td></tr>
{{end}}</table>
<table>
<tr><th>latency (ms)</th><th class="n">p50</th><th class="n">p90</th><th class="n">p99</th><th class="n">p99.9</th><th class="n">max</th><th class="n">mean</th></tr>
{{range .Lat}}<tr><td>{{.Name}}</td><td class="n">{{printf "%.2f" .L.P50Ms}}</td><td class="n">{{printf "%.2f" .L.P90Ms}}</td><td class="n">{{printf "%.2f" .L.P99Ms}}</td><td class="n">{{printf "%.2f" .L.P999Ms}}</td><td class="n">{{.Max}}</td><td class="n">{{printf "%.2f" .L.MeanMs}}</td></tr>
{{end}}</table>
{{if .R.FindMax}}
<h2>Capacity search</h2>
{{if not .R.FindMax.SearchComplete}}<p class="note bad"><b>Search incomplete:</b> {{.R.FindMax.Incomplete}}.</p>{{end}}
<p>Highest healthy rate: <b>{{if .R.FindMax.MaxHealthyRate}}{{if not .R.FindMax.SearchComplete}}at least {{end}}{{.MaxRate}} records/s{{else}}none — no step was healthy{{end}}</b> (healthy = produce p99 ≤ {{printf "%.2f" .R.FindMax.MaxP99Ms}} ms, error rate ≤ {{printf "%.4f" .ErrPct}} %, at least 90 % of the target rate achieved).</p>
<table><tr><th class="n">step</th><th class="n">target rec/s</th><th class="n">achieved rec/s</th><th class="n">p99 ms</th>{{if .StepDevice}}<th class="n">device MB/s</th><th class="n">device B/record B</th><th class="n">device busy</th>{{end}}<th>verdict</th></tr>
{{range $i, $s := .R.FindMax.Steps}}<tr><td class="n">{{inc $i}}</td><td class="n">{{num $s.Rate}}</td><td class="n">{{num $s.Result.RecordsPerSec}}</td><td class="n">{{printf "%.2f" $s.Result.ProduceP99Ms}}</td>{{if $.StepDevice}}{{with $s.Result.Device}}<td class="n">{{printf "%.1f" (devMBs . $s.Result.DurationS)}}</td><td class="n">{{printf "%.2f" .BytesPerRecordByte}}</td><td class="n">{{pct .BusyShare}}</td>{{else}}<td></td><td></td><td></td>{{end}}{{end}}<td class="{{if $s.Healthy}}good{{else}}bad{{end}}">{{if $s.Retry}}retry {{$s.Retry}}, {{end}}{{if $s.Healthy}}healthy{{else}}unhealthy: {{$s.Reason}}{{end}}</td></tr>
{{end}}</table>
<figure>{{.FindMaxChart}}</figure>
{{end}}
{{if .R.DeviceBaseline}}
<h2>Device ceiling</h2>
<p>{{.DeviceHow}}.</p>
<table>{{range .DeviceRows}}<tr><td>{{.K}}</td><td class="n">{{.V}}</td></tr>
{{end}}</table>
{{end}}
{{with .R.Faults}}
<h2>Faults</h2>
<p>{{join .Kinds ","}}, one every {{printf "%.1f" .IntervalS}} s{{if .CountLimit}} (at most {{.CountLimit}}){{end}}{{if .PauseS}}, pauses of {{printf "%.1f" .PauseS}} s{{end}}; longest recovery (every broker listed, every partition fully in sync) {{printf "%.2f" .MaxRecoveredS}} s.</p>
<table><tr><th>fault</th><th class="n">ran</th><th class="n">failed</th><th class="n">without recovery</th></tr>
{{range .Ran}}<tr><td>{{.Kind}}</td><td class="n">{{.Count}}</td><td class="n">{{.Failed}}</td><td class="n">{{.NotRecovered}}</td></tr>
{{end}}</table>
{{end}}
{{with .R.Verify}}
<h2>Verification</h2>
<p class="note {{if .Failed}}bad{{else}}good{{end}}"><b>{{.Summary}}</b>{{with .Incomplete}}; read-back incomplete: {{.}}{{end}}</p>
<table><tr><th class="n">partition</th><th class="n">acked</th><th class="n">read back</th><th class="n">lost</th><th class="n">duplicated</th><th class="n">reordered</th><th class="n">unacked read</th></tr>
{{range .Partitions}}<tr><td class="n">{{.Partition}}</td><td class="n">{{.Acked}}</td><td class="n">{{.Read}}</td><td class="n">{{.Lost}}</td><td class="n">{{.Duplicated}}</td><td class="n">{{.Reordered}}</td><td class="n">{{.UnackedRead}}</td></tr>
{{end}}</table>
{{range .Examples}}<p class="bad">{{.Kind}}: partition {{.Partition}} producer {{.Producer}} seq {{.Seq}} offset {{.Offset}}</p>{{end}}
{{end}}
<h2>Latency over time</h2>
<figure>{{.LatencyChart}}</figure>
<h2>Throughput over time</h2>
<figure>{{.ThroughputChart}}</figure>
<h2>Latency percentile distribution</h2>
<figure>{{.PercentileChart}}</figure>
<h2>CPU over time</h2>
<figure>{{.CPUChart}}</figure>
{{if .R.Result.Errors}}<h2>Errors</h2>
<table><tr><th class="n">count</th><th>error</th></tr>
{{range .R.Result.Errors}}<tr><td class="n">{{.Count}}</td><td>{{.Error}}</td></tr>{{end}}</table>{{end}}
<h2>Configuration</h2>
<table>{{range .Config}}<tr><td>{{.K}}</td><td>{{.V}}</td></tr>
{{end}}</table>
</body></html>
`))

type kv struct{ K, V string }

type latRow struct {
	Name string
	L    Latency
	Max  string // L.MaxMs as shown
}

// WriteHTML writes the self-contained HTML report.
func (r *Report) WriteHTML(w io.Writer) error {
	res := &r.Result
	target := "brokers " + fmt.Sprint(r.Target.Brokers)
	if r.Target.Spawned > 0 {
		target = fmt.Sprintf("%d spawned strata broker(s) at %v", r.Target.Spawned, r.Target.Brokers)
	}
	summary := []kv{
		{"duration", fmt.Sprintf("%.2f s", res.DurationS)},
		{"records acked", commas(float64(res.RecordsAcked), 0)},
		{"records failed", fmt.Sprintf("%s (%.4f %%)", commas(float64(res.RecordsFailed), 0), 100*res.ErrorRate)},
		{"records/s", commas(res.RecordsPerSec, 1)},
		{"MB/s", fmt.Sprintf("%.2f", res.MBPerSec)},
		{"batches/s", commas(res.BatchesPerSec, 1)},
		{"records/batch", fmt.Sprintf("%.1f", res.RecordsPerBatch)},
		{"requests/s", commas(res.RequestsPerSec, 1)},
		{"client CPU", fmt.Sprintf("%.2f s (%.2f µs/record)%s", res.ClientCPUSeconds, res.ClientCPUUsPerRecord, res.clientCPUParts())},
	}
	if res.TargetRate > 0 {
		summary = append(summary[:3], append([]kv{{"target records/s", commas(res.TargetRate, 0)}}, summary[3:]...)...)
	}
	if r.Config.Consumers > 0 {
		summary = append(summary, kv{"records consumed", commas(float64(res.RecordsConsumed), 0) + res.groupNote()})
	}
	if res.BrokerCPUSeconds != nil {
		summary = append(summary,
			kv{"broker CPU", fmt.Sprintf("%.2f s (%.2f µs/record)", *res.BrokerCPUSeconds, res.BrokerCPUUsPerRecord)},
			kv{"broker RSS", fmt.Sprintf("%s (peak %s)", mib(res.BrokerRSSBytes), mib(res.BrokerPeakRSSBytes))})
	}
	if d := res.Device; d != nil {
		summary = append(summary, kv{"device writes", d.summary()}, kv{"device load", d.load()})
	}
	lat := []latRow{{"produce (scheduled send → ack)", Latency{P50Ms: res.ProduceP50Ms, P90Ms: res.ProduceP90Ms, P99Ms: res.ProduceP99Ms,
		P999Ms: res.ProduceP999Ms, MeanMs: res.ProduceMeanMs}, f2(res.ProduceMaxMs)}}
	if res.BrokerProduceRequests > 0 {
		lat = append(lat, latRow{fmt.Sprintf("broker produce (request frame → response; %s requests, interpolated in buckets)",
			commas(float64(res.BrokerProduceRequests), 0)), Latency{P50Ms: res.BrokerProduceP50Ms, P90Ms: res.BrokerProduceP90Ms,
			P99Ms: res.BrokerProduceP99Ms, P999Ms: res.BrokerProduceP999Ms, MeanMs: res.BrokerProduceMeanMs}, res.brokerProduceMax()})
	}
	if r.Config.Consumers > 0 {
		lat = append(lat, latRow{"end-to-end (scheduled send → poll)", Latency{P50Ms: res.E2EP50Ms, P90Ms: res.E2EP90Ms, P99Ms: res.E2EP99Ms,
			P999Ms: res.E2EP999Ms, MeanMs: res.E2EMeanMs}, f2(res.E2EMaxMs)})
	}
	var cfgRows []kv
	var cfgMap map[string]any
	raw, _ := json.Marshal(r.Config)
	json.Unmarshal(raw, &cfgMap)
	for k, v := range cfgMap {
		cfgRows = append(cfgRows, kv{k, fmt.Sprint(v)})
	}
	sort.Slice(cfgRows, func(i, j int) bool { return cfgRows[i].K < cfgRows[j].K })

	data := map[string]any{
		"R":               r,
		"Target":          target,
		"HostLine":        r.Host.describe(),
		"When":            wallClock().Format(time.RFC1123),
		"Summary":         summary,
		"Lat":             lat,
		"Config":          cfgRows,
		"LatencyChart":    template.HTML(r.latencyChart()),
		"ThroughputChart": template.HTML(r.throughputChart()),
		"PercentileChart": template.HTML(r.percentileChart()),
		"CPUChart":        template.HTML(r.cpuChart()),
	}
	if fm := r.FindMax; fm != nil {
		data["MaxRate"] = commas(fm.MaxHealthyRate, 0)
		data["ErrPct"] = 100 * fm.MaxErrorRate
		data["FindMaxChart"] = template.HTML(r.findMaxChart())
		data["StepDevice"] = fm.stepsHaveDevice()
	}
	if db := r.DeviceBaseline; db != nil {
		data["DeviceHow"] = db.describe()
		rows := []kv{
			{"device ceiling", fmt.Sprintf("%.1f MB/s", db.MBPerSec)},
			{"written", fmt.Sprintf("%.1f MB in %.2f s, %d fdatasyncs (%s backend)", float64(db.Bytes)/1e6, db.DurationS, db.Syncs, db.Backend)},
		}
		if db.Device != "" {
			rows = append(rows, kv{"the probe's device traffic", db.traffic()})
		}
		data["DeviceRows"] = append(rows, kv{"acknowledged record MB/s ÷ ceiling", fmt.Sprintf("%.1f %%", 100*db.Ratio)})
	}
	return reportTmpl.Execute(w, data)
}

// WriteHTMLFile writes the HTML report to path.
func (r *Report) WriteHTMLFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.WriteHTML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *Report) timelineSeries(name, color string, dashed bool, f func(Sample) float64) series {
	s := series{name: name, color: color, dashed: dashed}
	for _, p := range r.Timeline {
		s.xs = append(s.xs, p.TS)
		s.ys = append(s.ys, f(p))
	}
	return s
}

func (r *Report) latencyChart() string {
	ss := []series{
		r.timelineSeries("produce p50", "#1f77b4", false, func(s Sample) float64 { return s.ProduceP50Ms }),
		r.timelineSeries("produce p99", "#ff7f0e", false, func(s Sample) float64 { return s.ProduceP99Ms }),
		r.timelineSeries("produce max", "#d62728", true, func(s Sample) float64 { return s.ProduceMaxMs }),
	}
	if r.Config.Consumers > 0 {
		ss = append(ss, r.timelineSeries("end-to-end p99", "#2ca02c", true, func(s Sample) float64 { return s.E2EP99Ms }))
	}
	spec := chartSpec{
		title:  "Latency per second (log scale)",
		x:      axisSpec{label: "time since start (s)"},
		y:      axisSpec{label: "latency (ms)", log: true},
		series: ss,
	}
	if r.FindMax != nil {
		spec.hline, spec.hlineLabel = r.FindMax.MaxP99Ms, fmt.Sprintf("p99 bound %.1f ms", r.FindMax.MaxP99Ms)
	}
	return svgChart(spec)
}

func (r *Report) throughputChart() string {
	ss := []series{r.timelineSeries("acknowledged records/s", "#1f77b4", false, func(s Sample) float64 { return s.RecordsPerSec })}
	if r.Config.Consumers > 0 {
		ss = append(ss, r.timelineSeries("consumed records/s", "#2ca02c", true, func(s Sample) float64 { return s.ConsumedPerSec }))
	}
	if r.hasErrors() {
		ss = append(ss, r.timelineSeries("failed records/s", "#d62728", false, func(s Sample) float64 { return float64(s.Errors) }))
	}
	return svgChart(chartSpec{
		title:  "Throughput per second",
		x:      axisSpec{label: "time since start (s)"},
		y:      axisSpec{label: "records per second", zero: true},
		series: ss,
	})
}

func (r *Report) hasErrors() bool {
	for _, s := range r.Timeline {
		if s.Errors > 0 {
			return true
		}
	}
	return false
}

// percentileChart plots latency against percentile on the log(1/(1-p))
// axis, where each decade is one more nine.
func (r *Report) percentileChart() string {
	toSeries := func(name, color string, pts []PercentilePoint) (series, float64) {
		s := series{name: name, color: color}
		maxMs := math.NaN()
		for _, p := range pts {
			if p.Percentile >= 100 {
				maxMs = p.Ms
				continue
			}
			s.xs = append(s.xs, 1/(1-p.Percentile/100))
			s.ys = append(s.ys, p.Ms)
		}
		return s, maxMs
	}
	var ss []series
	prod, pmax := toSeries("produce", "#1f77b4", r.Distribution.Produce)
	prod.name = fmt.Sprintf("produce (max %.2f ms)", pmax)
	ss = append(ss, prod)
	if len(r.Distribution.E2E) > 0 {
		e2e, emax := toSeries("end-to-end", "#2ca02c", r.Distribution.E2E)
		e2e.name = fmt.Sprintf("end-to-end (max %.2f ms)", emax)
		ss = append(ss, e2e)
	}
	var ticks []tick
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"}
	top := 1.0
	for _, s := range ss {
		for _, x := range s.xs {
			top = math.Max(top, x)
		}
	}
	for i, l := range labels {
		v := math.Pow(10, float64(i))
		ticks = append(ticks, tick{v, l})
		if v >= top*0.999 {
			break
		}
	}
	return svgChart(chartSpec{
		title:  "Latency by percentile (log scales)",
		x:      axisSpec{label: "percentile", log: true, ticks: ticks},
		y:      axisSpec{label: "latency (ms)", log: true},
		series: ss,
	})
}

func (r *Report) cpuChart() string {
	ss := []series{r.timelineSeries("loadgen (client) CPU %", "#9467bd", false, func(s Sample) float64 { return s.ClientCPUPercent })}
	if r.Target.Spawned > 0 {
		ss = append(ss, r.timelineSeries("broker CPU %", "#8c564b", false, func(s Sample) float64 { return s.BrokerCPUPercent }))
	}
	return svgChart(chartSpec{
		title:  "CPU per second (100% = one core)",
		x:      axisSpec{label: "time since start (s)"},
		y:      axisSpec{label: "CPU (% of a core)", zero: true},
		series: ss,
	})
}

func (r *Report) findMaxChart() string {
	fm := r.FindMax
	steps := append([]Step(nil), fm.Steps...)
	sort.Slice(steps, func(i, j int) bool { return steps[i].Rate < steps[j].Rate })
	p99 := series{name: "produce p99 (ms) by target rate", color: "#ff7f0e"}
	for _, s := range steps {
		p99.xs = append(p99.xs, s.Rate)
		p99.ys = append(p99.ys, s.Result.ProduceP99Ms)
	}
	return svgChart(chartSpec{
		title:      "Capacity search: p99 produce latency against target rate",
		x:          axisSpec{label: "target rate (records/s)", fmtTick: fmtNum},
		y:          axisSpec{label: "p99 latency (ms)", log: true},
		series:     []series{p99},
		hline:      fm.MaxP99Ms,
		hlineLabel: fmt.Sprintf("bound %.1f ms", fm.MaxP99Ms),
	})
}
