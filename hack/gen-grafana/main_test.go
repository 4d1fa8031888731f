package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

// The test reads the JSON, not the SDK's structs: the file is what Grafana imports.
type jsonDashboard struct {
	UID        string      `json:"uid"`
	Title      string      `json:"title"`
	Tags       []string    `json:"tags"`
	Panels     []jsonPanel `json:"panels"`
	Templating struct {
		List []jsonVariable `json:"list"`
	} `json:"templating"`
}

type jsonPanel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type jsonVariable struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Query      string `json:"query"`
	Multi      bool   `json:"multi"`
	IncludeAll bool   `json:"includeAll"`
}

func decode(t *testing.T) jsonDashboard {
	t.Helper()
	body, err := dashboardJSON()
	require.NoError(t, err)
	var d jsonDashboard
	require.NoError(t, json.Unmarshal(body, &d))
	return d
}

// panels are the dashboard's panels but its rows.
func panels(d jsonDashboard) []jsonPanel {
	var out []jsonPanel
	for _, p := range d.Panels {
		if p.Type != "row" {
			out = append(out, p)
		}
	}
	return out
}

func TestJSONIsValidAndDeterministic(t *testing.T) {
	first, err := dashboardJSON()
	require.NoError(t, err)
	second, err := dashboardJSON()
	require.NoError(t, err)
	assert.True(t, json.Valid(first), "not JSON")
	assert.Equal(t, string(first), string(second), "two builds differ")
	assert.True(t, strings.HasSuffix(string(first), "}\n"), "no final newline")
	assert.True(t, strings.HasPrefix(string(first), "{\n  \""), "not indented by two spaces")

	// run writes those bytes, making the directory.
	out := filepath.Join(t.TempDir(), "grafana", "dashboard.json")
	require.NoError(t, run(out))
}

func TestDashboard(t *testing.T) {
	d := decode(t)
	assert.Equal(t, "stepwise", d.UID)
	assert.Equal(t, "Stepwise", d.Title)
	assert.Equal(t, []string{"stepwise"}, d.Tags)

	vars := map[string]jsonVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	tests := []struct {
		name string
		want jsonVariable
	}{
		{"datasource", jsonVariable{Type: "datasource", Name: "datasource", Query: "prometheus"}},
		{"namespace", jsonVariable{Type: "query", Name: "namespace", Multi: true, IncludeAll: true,
			Query: "label_values(" + metrics.PipelinesName + ", namespace)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, vars[tt.name])
		})
	}
}

func TestEveryPanelHasATitleAndATarget(t *testing.T) {
	ids := map[int]bool{}
	for _, p := range decode(t).Panels {
		assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		assert.NotEmpty(t, p.Title, "panel %d has no title", p.ID)
		if assert.NotEmpty(t, p.Targets, "panel %q has no target", p.Title) {
			for _, target := range p.Targets {
				assert.NotEmpty(t, target.Expr, "panel %q has a target without an expression", p.Title)
			}
		}
	}
}

// metricName matches what a query names as a metric. Queue names (stepwise-operator) have
// a hyphen, and labels and functions have neither prefix, so nothing else matches.
var metricName = regexp.MustCompile(`\b(?:stepwise|workqueue)_[a-z_]+`)

// seriesSuffix is what Prometheus appends to a histogram's name for its series.
var seriesSuffix = regexp.MustCompile(`_(?:bucket|sum|count)$`)

func TestQueriesNameDefinedMetrics(t *testing.T) {
	kinds := map[string]metrics.Kind{}
	for _, def := range metrics.Definitions() {
		kinds[def.Name] = def.Kind
	}
	var seen int
	for _, p := range panels(decode(t)) {
		for _, target := range p.Targets {
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				seen++
				if _, ok := kinds[name]; ok {
					continue
				}
				// A suffixed name is a series of a histogram, and only of one.
				base := seriesSuffix.ReplaceAllString(name, "")
				assert.Equal(t, metrics.Histogram, kinds[base],
					"panel %q queries %s, which is no metric of metrics.Definitions() (nor a histogram's series)", p.Title, name)
			}
		}
	}
	// A regexp that matched nothing would pass the loop above.
	assert.Greater(t, seen, 10, "too few metric names found in the queries")
}

func TestPanels(t *testing.T) {
	d := decode(t)
	// row is the title of the row each panel sits under (the last row before it).
	type placed struct{ row, typ, unit string }
	got := map[string]placed{}
	var row string
	for _, p := range d.Panels {
		if p.Type == "row" {
			row = p.Title
			continue
		}
		got[p.Title] = placed{row, p.Type, p.FieldConfig.Defaults.Unit}
	}
	tests := []struct {
		row, title, typ string
		seconds         bool
	}{
		{"Pipelines", "Pipelines by phase", "timeseries", false},
		{"Pipelines", "Pipelines held back, by kind", "timeseries", false},
		{"Pipelines", "Longest held back, by kind", "timeseries", true},
		{"Pipelines", "Steps by executor and phase", "timeseries", false},
		{"Triggers", "Trigger objects by state", "timeseries", false},
		{"Triggers", "Failure budget left", "stat", false},
		{"Triggers", "Triggers held back", "timeseries", true},
		{"Executors", "Hook duration p95 by executor", "timeseries", true},
		{"Executors", "Hook retries", "timeseries", false},
		{"Executors", "Plugin restarts", "timeseries", false},
		{"Operator", "Workqueue depth", "timeseries", false},
		{"Operator", "Workqueue mean wait", "timeseries", true},
		{"Operator", "API requests by code", "timeseries", false},
		{"Operator", "Recovered panics", "timeseries", false},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			p, ok := got[tt.title]
			require.True(t, ok, "no panel %q", tt.title)
			assert.Equal(t, tt.row, p.row)
			assert.Equal(t, tt.typ, p.typ)
			if tt.seconds {
				assert.Equal(t, "s", p.unit)
			} else {
				assert.NotEqual(t, "s", p.unit)
			}
		})
	}
	assert.Len(t, got, len(tests), "a panel the table does not list")
}
