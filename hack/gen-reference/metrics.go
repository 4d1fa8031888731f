package main

import (
	"bytes"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

// renderMetrics lists every metric the operator exports, from the definitions its
// collectors are made from (pkg/metrics).
func renderMetrics(string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# The operator's metrics\n\n")
	b.WriteString("Every metric `stepwise-operator` serves on `/metrics` besides Go's and the process's " +
		"(`pkg/metrics`). The state metrics (`stepwise_pipelines`, `stepwise_steps`, `stepwise_pipelines_blocked*`, " +
		"`stepwise_trigger_*`) are read from the leader's caches at each scrape; a standby replica serves none. " +
		"No label is a pipeline's, a step's or an object's name: a series is per namespace, phase, executor, kind " +
		"of blocker or trigger, and an executor no one offers counts as `unknown`, a kind of blocker an executor " +
		"makes up as `Other`. The alert rules are in [deploy/prometheus](../../deploy/prometheus) and the Grafana " +
		"dashboard in [deploy/grafana](../../deploy/grafana).\n\n")
	var rows [][]string
	for _, d := range metrics.Definitions() {
		labels := "-"
		if len(d.Labels) > 0 {
			labels = code(strings.Join(d.Labels, ", "))
		}
		rows = append(rows, []string{code(d.Name), string(d.Kind), labels, cell(d.Help)})
	}
	table(&b, []string{"metric", "type", "labels", "what"}, rows)
	return b.Bytes(), nil
}
