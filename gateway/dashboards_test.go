package gateway

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
)

// registeredSeries are the names of every series a real gateway's registry
// serves: each collector's descriptors, with the _bucket, _sum and _count
// series of its histograms and summaries.
func registeredSeries(t *testing.T) map[string]bool {
	t.Helper()
	hash, err := auth.HashAPIKey(auth.NewAPIKey())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("series.yaml", []byte(`listen: 127.0.0.1:0
backends:
  - name: local
    type: local
    local: {maxWorkers: 1, minWorkers: 1}
tenants:
  - name: t
    backend: local
    keys: [{name: k, hash: `+hash+`}]
routes:
  - path: /v1/executor
    kind: executor
`), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for _, c := range g.metrics.collectors {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		_, histogram := c.(*prometheus.HistogramVec)
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			names[m[1]] = true
			if histogram {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					names[m[1]+suffix] = true
				}
			}
		}
	}
	families, err := g.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	return names
}

var (
	promString    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promBraces    = regexp.MustCompile(`\{[^{}]*\}`)
	promRange     = regexp.MustCompile(`\[[^\]]*\]`)
	promVariable  = regexp.MustCompile(`\$\{?\w+\}?`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues   = regexp.MustCompile(`^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*\w+\s*\)$`)
	promLanguage  = map[string]bool{}
	promLanguageL = "sum avg min max count stddev topk bottomk quantile rate irate increase delta deriv histogram_quantile " +
		"abs ceil floor round clamp_min clamp_max absent absent_over_time avg_over_time max_over_time min_over_time " +
		"sum_over_time count_over_time time vector scalar label_replace and or unless bool offset"
)

func init() {
	for _, w := range strings.Fields(promLanguageL) {
		promLanguage[w] = true
	}
}

// seriesOf lists the series a PromQL expression (or a Grafana
// label_values query) names: the identifiers left once strings, label
// matchers, ranges, template variables and grouping clauses are taken out,
// less the language's own words.
func seriesOf(expr string) []string {
	if m := labelValues.FindStringSubmatch(strings.TrimSpace(expr)); m != nil {
		return []string{m[1]}
	}
	e := promString.ReplaceAllString(expr, " ")
	e = promVariable.ReplaceAllString(e, " ")
	for promBraces.MatchString(e) {
		e = promBraces.ReplaceAllString(e, " ")
	}
	e = promRange.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, id := range promIdent.FindAllString(e, -1) {
		if !promLanguage[id] {
			out = append(out, id)
		}
	}
	return out
}

func TestSeriesOf(t *testing.T) {
	for expr, want := range map[string]string{
		`histogram_quantile(0.95, sum by (le) (rate(codemode_queue_wait_seconds_bucket{tenant=~"$tenant",backend="a{b}"}[$__rate_interval])))`: "codemode_queue_wait_seconds_bucket",
		`sum by (job, backend) (codemode_workers_alive) >= sum without (x) (codemode_workers_max) and codemode_x > 0`:                          "codemode_workers_alive codemode_workers_max codemode_x",
		`label_values(codemode_build_info, job)`:           "codemode_build_info",
		`rate(process_cpu_seconds_total{job=~"$job"}[5m])`: "process_cpu_seconds_total",
		`nonsense_word(codemode_pins)`:                     "nonsense_word codemode_pins",
	} {
		if got := strings.Join(seriesOf(expr), " "); got != want {
			t.Errorf("seriesOf(%s) = %q, want %q", expr, got, want)
		}
	}
}

// checkExpr fails unless expr names at least one series and only
// registered ones.
func checkExpr(t *testing.T, where, expr string, series map[string]bool) {
	t.Helper()
	names := seriesOf(expr)
	if len(names) == 0 {
		t.Errorf("%s: %q names no series", where, expr)
	}
	for _, n := range names {
		if !series[n] {
			t.Errorf("%s: %q names %s, which the gateway does not serve", where, expr, n)
		}
	}
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// TestGrafanaDashboardNamesServedSeries: every query of the dashboard,
// its template variables' included, names only series the gateway serves.
func TestGrafanaDashboardNamesServedSeries(t *testing.T) {
	series := registeredSeries(t)
	raw, err := os.ReadFile("../deploy/grafana/codemode-gateway.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string         `json:"uid"`
		Title      string         `json:"title"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Fatal("the dashboard has no uid or title")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q has no data source variable or no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q is empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			checkExpr(t, "panel "+p.Title, tg.Expr, series)
			queries++
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		expr, _ := q["query"].(string)
		checkExpr(t, "variable "+v.Name, expr, series)
		queries++
	}
	if queries < 20 {
		t.Fatalf("the dashboard has %d queries", queries)
	}
}

// TestAlertRulesNameServedSeries: the alerting rules parse, cover the pool
// that saturates, the group without a healthy member and the worker crash
// loop, and name only series the gateway serves.
func TestAlertRulesNameServedSeries(t *testing.T) {
	series := registeredSeries(t)
	raw, err := os.ReadFile("../deploy/prometheus/codemode-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.UnmarshalWithOptions(raw, &file, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Alert == "" || r.For == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q lacks its name, its for or its summary", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("rule %q: severity %q", r.Alert, s)
			}
			checkExpr(t, "alert "+r.Alert, r.Expr, series)
		}
	}
	for _, want := range []string{"CodemodePoolSaturated", "CodemodeBackendGroupDown", "CodemodeWorkerCrashLoop"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}
