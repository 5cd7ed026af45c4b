package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// promSelector is a metric name a PromQL expression reads and the label
// names its matchers use ({name="v", ...}).
type promSelector struct {
	name   string
	labels []string
}

// promKeywords are PromQL words that are not metric names.
var promKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true, "atan2": true,
	// aggregations, which may come before their parentheses (max by (x) (...))
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// promSelectors scans a PromQL expression (with Grafana's $variables) for
// the metric names it reads: identifiers [a-zA-Z_:][a-zA-Z0-9_:]* that are
// not functions (followed by "("), keywords, label names of by(),
// without(), on(), ignoring(), group_left() and group_right(), nor inside
// {} matchers, [] ranges, strings, numbers and durations. It checks that
// brackets balance.
func promSelectors(expr string) ([]promSelector, error) {
	var out []promSelector
	var stack []byte
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	// closing returns the index just past the matching close of the
	// bracket at i, skipping strings.
	closing := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); j++ {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				k := j + 1
				for k < len(expr) && expr[k] != c {
					if expr[k] == '\\' {
						k++
					}
					k++
				}
				j = k
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c at %d", open, i)
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			k := i + 1
			for k < len(expr) && expr[k] != c {
				if expr[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(expr) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i = k + 1
		case c == '[':
			j, err := closing(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{': // matchers without a name before them
			j, err := closing(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '(':
			stack = append(stack, c)
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced ) at %d", i)
			}
			stack = stack[:len(stack)-1]
			i++
		case c == '$': // a Grafana variable
			i++
			for i < len(expr) && isPart(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.': // a number or a duration
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			switch {
			case next < len(expr) && expr[next] == '(' && (word == "by" || word == "without" || word == "on" ||
				word == "ignoring" || word == "group_left" || word == "group_right"):
				k, err := closing(next, '(', ')')
				if err != nil {
					return nil, err
				}
				i = k
			case next < len(expr) && expr[next] == '(', promKeywords[strings.ToLower(word)]:
				i = j // a function or aggregation; its arguments are scanned
			default:
				sel := promSelector{name: word}
				i = j
				if next < len(expr) && expr[next] == '{' {
					k, err := closing(next, '{', '}')
					if err != nil {
						return nil, err
					}
					for _, m := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`).FindAllStringSubmatch(
						regexp.MustCompile(`"(\\.|[^"\\])*"`).ReplaceAllString(expr[next:k], `""`), -1) {
						sel.labels = append(sel.labels, m[1])
					}
					i = k
				}
				out = append(out, sel)
			}
		default:
			i++
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("unbalanced (")
	}
	return out, nil
}

func TestPromSelectors(t *testing.T) {
	got, err := promSelectors(`histogram_quantile(0.99, sum by (le, request) (rate(a_b_bucket{job=~"$job",request="Pro}duce"}[$__rate_interval] offset 5m))) / on(instance) group_left(x) max without (y) (c:d) > bool 1e3 or vector(0)`)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != "[{a_b_bucket [job request]} {c:d []}]" {
		t.Errorf("got %s", s)
	}
	for _, bad := range []string{`sum(rate(x[5m])`, `x{a="b"`, `x)`} {
		if _, err := promSelectors(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// docs/grafana-dashboard.json: every query of every panel and template
// variable parses (brackets balance), and every metric it reads is one a
// real broker exports, scraped from `strata serve --metrics-listeners`
// after a produce, a consumer group's consume and commit, and an error
// answered (lazily registered series exist then); a histogram's base name
// matches its _bucket, _sum and _count series, and every label a matcher
// names is one of the family's labels (or Prometheus' instance, job, le).
// The controller's strata_controller_* metrics exist only on a broker of a
// cluster (--controller-quorum): those are checked against docs/metrics.md
// instead. The dashboard covers what docs/operations.md says to watch.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Inputs []struct {
			Name, Type, PluginID string
		} `json:"__inputs"`
		Title      string
		UID        string
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Name  string
				Type  string
				Query json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	if len(dash.Inputs) != 1 || dash.Inputs[0].Name != "DS_PROMETHEUS" || dash.Inputs[0].PluginID != "prometheus" || dash.Title == "" || dash.UID == "" {
		t.Errorf("inputs %+v, title %q, uid %q", dash.Inputs, dash.Title, dash.UID)
	}
	type panel struct {
		Type       string
		Title      string
		ID         int
		Datasource struct{ Type, UID string }
		GridPos    struct{ H, W, X, Y int }
		Targets    []struct {
			RefID string
			Expr  string
		}
		Panels []json.RawMessage
	}
	type query struct{ where, expr string }
	var queries []query
	ids := map[int]bool{}
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			if ids[p.ID] {
				t.Errorf("panel id %d twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
			}
			switch p.Type {
			case "row":
				walk(p.Panels)
				continue
			case "timeseries", "stat":
			default:
				t.Errorf("panel %q: type %q", p.Title, p.Type)
			}
			if p.Datasource.Type != "prometheus" || p.Datasource.UID != "${DS_PROMETHEUS}" || len(p.Targets) == 0 {
				t.Errorf("panel %q: datasource %+v, %d targets", p.Title, p.Datasource, len(p.Targets))
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("panel %q: target %+v", p.Title, tg)
				}
				refs[tg.RefID] = true
				queries = append(queries, query{"panel " + strconv.Quote(p.Title), tg.Expr})
			}
		}
	}
	walk(dash.Panels)
	// Template variables: label_values(selector, label).
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	type labelUse struct{ where, metric, label string }
	var labelUses []labelUse
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		queries = append(queries, query{"variable " + v.Name, m[1]})
		sels, _ := promSelectors(m[1])
		if len(sels) == 1 {
			labelUses = append(labelUses, labelUse{"variable " + v.Name, sels[0].name, m[2]})
		}
	}
	if len(queries) < 40 {
		t.Fatalf("only %d queries in the dashboard", len(queries))
	}

	// A broker with traffic: a produce, a group's consume and commit, an
	// error (CreateTopics of a topic that exists).
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	srv := startServe(t, bin, hangGuard, true, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--metrics-listeners", "http://127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.kafka), kgo.DefaultProduceTopic("dash"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(i)}, Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "dash"); err == nil {
		t.Error("CreateTopics of an existing topic succeeded")
	}
	cl.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(srv.kafka), kgo.ConsumerGroup("dashboard"), kgo.ConsumeTopics("dash"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n/2; {
		fs := cons.PollRecords(ctx, n/2-got)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	fams, err := metricstest.Scrape("http://" + srv.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	// exported series names -> the family's label names.
	exported := map[string]map[string]bool{}
	for name, f := range fams {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		exported[name] = labels
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			bucket := map[string]bool{"le": true}
			for l := range labels {
				bucket[l] = true
			}
			exported[name+"_bucket"] = bucket
			exported[name+"_sum"], exported[name+"_count"] = labels, labels
		case dto.MetricType_SUMMARY:
			exported[name+"_sum"], exported[name+"_count"] = labels, labels
		}
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var fromDocs []string
	for _, q := range queries {
		sels, err := promSelectors(q.expr)
		if err != nil {
			t.Errorf("%s: %q: %v", q.where, q.expr, err)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: %q reads no metric", q.where, q.expr)
		}
		for _, s := range sels {
			used[s.name] = true
			labels, ok := exported[s.name]
			if !ok {
				if strings.HasPrefix(s.name, "strata_controller_") && strings.Contains(string(doc), "`"+s.name+"`") {
					fromDocs = append(fromDocs, s.name)
					continue
				}
				t.Errorf("%s: %q reads %s, which the broker does not export", q.where, q.expr, s.name)
				continue
			}
			for _, l := range s.labels {
				if !labels[l] && l != "instance" && l != "job" {
					t.Errorf("%s: %q matches label %s, which %s does not have", q.where, q.expr, l, s.name)
				}
			}
		}
	}
	for _, u := range labelUses {
		if labels, ok := exported[u.metric]; !ok || !labels[u.label] && u.label != "instance" && u.label != "job" {
			t.Errorf("%s: label_values(%s, %s): no such series or label", u.where, u.metric, u.label)
		}
	}
	sort.Strings(fromDocs)
	t.Logf("%d queries, %d metric names; checked against docs/metrics.md (cluster only): %v", len(queries), len(used), fromDocs)
	// What an operator watches (docs/operations.md, "What to monitor").
	for _, name := range []string{
		"strata_requests_total", "strata_request_errors_total", "strata_request_total_time_seconds_bucket",
		"strata_request_queue_time_seconds_bucket", "strata_request_processing_time_seconds_bucket",
		"strata_response_send_time_seconds_bucket", "strata_topic_bytes_in_total", "strata_topic_bytes_out_total",
		"strata_topic_records_in_total", "strata_under_replicated_partitions", "strata_under_min_isr_partitions",
		"strata_offline_partitions", "strata_isr_shrinks_total", "strata_isr_expands_total",
		"strata_journal_flush_seconds_bucket", "strata_group_lag_records", "strata_group_lag_seconds",
		"strata_group_retention_margin_records", "strata_connections", "strata_controller_role",
		"strata_controller_raft_term", "process_cpu_seconds_total", "process_resident_memory_bytes",
		"process_open_fds", "process_max_fds",
	} {
		if !used[name] {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
}
