// Command gen-grafana writes the Grafana dashboard of the operator's metrics,
// deploy/grafana/stepwise-dashboard.json, with the Grafana Foundation SDK. Its queries are
// made from the metric names of pkg/metrics, so a renamed metric changes the dashboard with
// it, and hack/verify-reference.sh (make verify) fails while the committed file is stale.
//
// Run it from the module's root: go run ./hack/gen-grafana [-o deploy/grafana/stepwise-dashboard.json].
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"

	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

func main() {
	out := flag.String("o", filepath.Join("deploy", "grafana", "stepwise-dashboard.json"), "File to write the dashboard to.")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen-grafana:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	body, err := dashboardJSON()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, body, 0o644)
}

const (
	// nsFilter keeps the series of the namespaces picked in the namespace variable.
	nsFilter = `{namespace=~"$namespace"}`
	// queueFilter keeps the operator's two workqueues: controller-runtime's metrics of
	// every other controller in the same Prometheus share these names.
	queueFilter = `{name=~"stepwise-operator|stepwise-trigger"}`
	// rateWindow spans several scrapes at any usual interval, so a rate is never empty.
	rateWindow = "5m"
)

// datasource is the Prometheus the datasource variable picks, so the dashboard imports
// into any Grafana whatever its data source's uid.
func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
}

// panel is one panel of the dashboard; a stat panel shows the last value of each series.
type panel struct {
	title, description string
	expr, legend       string
	unit               string
	stat               bool
}

// row is a titled row of panels, laid side by side at equal widths.
type row struct {
	title  string
	panels []panel
}

// rows are the dashboard's content, top to bottom.
func rows() []row {
	bucket, sum, count := "_bucket", "_sum", "_count"
	return []row{
		{title: "Pipelines", panels: []panel{
			{title: "Pipelines by phase", legend: "{{phase}}", unit: units.Short,
				expr:        fmt.Sprintf("sum by (phase) (%s%s)", metrics.PipelinesName, nsFilter),
				description: "Pipelines of the selected namespaces by phase."},
			{title: "Pipelines held back, by kind", legend: "{{kind}}", unit: units.Short,
				expr:        fmt.Sprintf("sum by (kind) (%s%s)", metrics.PipelinesBlockedName, nsFilter),
				description: "Pipelines held back by the kind of what holds them (status.blockedBy)."},
			{title: "Longest held back, by kind", legend: "{{kind}}", unit: units.Seconds,
				expr:        fmt.Sprintf("max by (kind) (%s%s)", metrics.BlockedSecondsName, nsFilter),
				description: "How long the longest-held pipeline has been held back, by the kind of what holds it."},
			{title: "Steps by executor and phase", legend: "{{executor}} {{phase}}", unit: units.Short,
				expr:        fmt.Sprintf("sum by (executor, phase) (%s)", metrics.StepsName),
				description: "Steps of all pipelines (the metric has no namespace)."},
		}},
		{title: "Triggers", panels: []panel{
			{title: "Trigger objects by state", legend: "{{trigger}} {{state}}", unit: units.Short,
				expr:        fmt.Sprintf("sum by (trigger, state) (%s%s)", metrics.TriggerObjectsName, nsFilter),
				description: "A trigger's objects and pipelines by state."},
			{title: "Failure budget left", legend: "{{namespace}}/{{trigger}}", unit: units.Short, stat: true,
				expr:        fmt.Sprintf("%s%s", metrics.TriggerBudgetLeftName, nsFilter),
				description: "Failures a trigger may still have; at 0 it starts nothing new."},
			{title: "Triggers held back", legend: "{{trigger}} {{kind}}", unit: units.Seconds,
				expr:        fmt.Sprintf("max by (trigger, kind) (%s%s)", metrics.TriggerBlockedName, nsFilter),
				description: "How long a trigger has been kept from starting pipelines, by the kind of what keeps it."},
		}},
		{title: "Executors", panels: []panel{
			{title: "Hook duration p95 by executor", legend: "{{executor}}", unit: units.Seconds,
				expr: fmt.Sprintf("histogram_quantile(0.95, sum by (executor, le) (rate(%s[%s])))",
					metrics.HookDurationName+bucket, rateWindow),
				description: "95th percentile of one call of an executor's hook."},
			{title: "Hook retries", legend: "{{executor}} {{hook}}", unit: units.OpsPerSecond,
				expr:        fmt.Sprintf("sum by (executor, hook) (rate(%s[%s]))", metrics.HookRetriesName, rateWindow),
				description: "Retries scheduled after a hook failed, per second."},
			// 15m: a restart is rare, and a wider window keeps one visible between scrapes.
			{title: "Plugin restarts", legend: "{{plugin}} {{cause}}", unit: units.Short,
				expr:        fmt.Sprintf("sum by (plugin, cause) (increase(%s[15m]))", metrics.PluginRestartsName),
				description: "Plugin processes started again in the last 15 minutes, by cause."},
		}},
		{title: "Operator", panels: []panel{
			{title: "Workqueue depth", legend: "{{name}}", unit: units.Short,
				expr:        metrics.WorkqueueDepthName + queueFilter,
				description: "Items waiting in the pipeline (stepwise-operator) and trigger (stepwise-trigger) queues."},
			{title: "Workqueue mean wait", legend: "{{name}}", unit: units.Seconds,
				expr: fmt.Sprintf("rate(%s%s[%s]) / rate(%s%s[%s])",
					metrics.WorkqueueLatencyName+sum, queueFilter, rateWindow,
					metrics.WorkqueueLatencyName+count, queueFilter, rateWindow),
				description: "Mean time an item waits in the queue before a worker takes it."},
			{title: "API requests by code", legend: "{{code}}", unit: units.RequestsPerSecond,
				expr:        fmt.Sprintf("sum by (code) (rate(%s[%s]))", metrics.APIRequestsName, rateWindow),
				description: "Requests to the Kubernetes API server by HTTP code."},
			// 1h: a panic is rare, and an hour keeps it on screen long enough to be seen.
			{title: "Recovered panics", legend: "{{kind}}", unit: units.Short,
				expr:        fmt.Sprintf("sum by (kind) (increase(%s[1h]))", metrics.SyncPanicsName),
				description: "Syncs that panicked and were recovered in the last hour, by kind."},
		}},
	}
}

const (
	gridWidth   = 24 // Grafana's grid is 24 columns wide.
	panelHeight = 8
)

// build makes the dashboard. Panel ids are given in order, so the output does not depend
// on Grafana assigning them at import.
//
// It is the classic (v1) dashboard model, which the SDK marks deprecated for dashboardv2:
// every Grafana imports v1 JSON through Dashboards → Import, while v2 needs Grafana 12 with
// its new dashboard API turned on.
//
//nolint:staticcheck // v1 on purpose, see above
func build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("Stepwise").
		Uid("stepwise").
		Tags([]string{"stepwise"}).
		Description("The Stepwise operator's metrics. Generated by hack/gen-grafana; do not edit.").
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("namespace").
			Label("Namespace").
			Datasource(datasource()).
			Query(dashboard.StringOrMap{String: cog.ToPtr(namespaceQuery())}).
			Definition(namespaceQuery()).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			// .* rather than the list of values: a namespace that appears after the
			// variable was refreshed still shows under All.
			AllValue(".*"))

	var id uint32
	for _, r := range rows() {
		id++
		b = b.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		width := uint32(gridWidth / len(r.panels))
		for _, p := range r.panels {
			id++
			b = b.WithPanel(p.builder(id, width))
		}
	}
	return b.Build()
}

// namespaceQuery lists the namespaces that have pipelines.
func namespaceQuery() string {
	return fmt.Sprintf("label_values(%s, namespace)", metrics.PipelinesName)
}

// builder is the SDK's builder of p.
func (p panel) builder(id, width uint32) cog.Builder[dashboard.Panel] {
	query := prometheus.NewDataqueryBuilder().
		RefId("A").
		Datasource(datasource()).
		Expr(p.expr).
		LegendFormat(p.legend).
		Range()
	if p.stat {
		return stat.NewPanelBuilder().
			Id(id).Title(p.title).Description(p.description).
			Datasource(datasource()).Unit(p.unit).
			Height(panelHeight).Span(width).
			WithTarget(query).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
			// Red at no budget left, green from one failure on.
			Thresholds(dashboard.NewThresholdsConfigBuilder().
				Mode(dashboard.ThresholdsModeAbsolute).
				Steps([]dashboard.Threshold{{Color: "red"}, {Value: cog.ToPtr(1.0), Color: "green"}})).
			ColorMode(common.BigValueColorModeBackground).
			Orientation(common.VizOrientationAuto)
	}
	return timeseries.NewPanelBuilder().
		Id(id).Title(p.title).Description(p.description).
		Datasource(datasource()).Unit(p.unit).Min(0).
		Height(panelHeight).Span(width).
		WithTarget(query).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		// One tooltip for all series, largest first: the series of a panel are read together.
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

// dashboardJSON is the dashboard as the committed file holds it: indented by two spaces,
// with a final newline. encoding/json writes struct fields in order and map keys sorted,
// so the same code always gives the same bytes.
func dashboardJSON() ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	body, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(body, '\n'), nil
}
