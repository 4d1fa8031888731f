package alerts

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

const (
	ruleFile  = "../../charts/stepwise/files/prometheus-rules.yaml"
	ruleTests = "../../deploy/prometheus/rules_test.yaml"
)

// The rule file the chart ships is what Rules makes with the default thresholds.
func TestTheShippedRulesAreGenerated(t *testing.T) {
	data, err := YAML(Default())
	require.NoError(t, err)
	committed, err := os.ReadFile(ruleFile)
	require.NoError(t, err)
	assert.Equal(t, Header+string(data), string(committed), "%s is stale: run make reference", ruleFile)
}

// Every series a rule reads is one the operator exports.
func TestRulesReadOnlyDefinedMetrics(t *testing.T) {
	defined := map[string]bool{}
	for _, d := range metrics.Definitions() {
		defined[d.Name] = true
	}
	name := regexp.MustCompile(`\b(stepwise_[a-z_]+|workqueue_[a-z_]+)`)
	for _, r := range Rules(Default()).Groups[0].Rules {
		for _, m := range name.FindAllString(r.Expr, -1) {
			m = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
			assert.True(t, defined[m], "%s reads %s, which the operator does not export", r.Alert, m)
		}
	}
}

// promtool checks the rules and runs their unit tests (deploy/prometheus/rules_test.yaml):
// each alert fires when it should and not before, with its labels and text.
func TestPromtool(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		var err error
		promtool, err = exec.LookPath("promtool")
		require.NoError(t, err, "promtool is missing: make prometheus installs Debian's prometheus package")
	}
	for _, args := range [][]string{{"check", "rules", ruleFile}, {"test", "rules", ruleTests}} {
		out, err := exec.CommandContext(t.Context(), promtool, args...).CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// Shorter thresholds make the same rules, only firing sooner (the e2e test's Prometheus).
func TestThresholdsOnlyChangeNumbers(t *testing.T) {
	short := Thresholds{Blocked: 5 * time.Second, TeardownBlocked: time.Second, TriggerStopped: time.Second,
		PluginRestarts: 1, RestartWindow: time.Minute, QueueWait: time.Second}
	def, fast := Rules(Default()).Groups[0].Rules, Rules(short).Groups[0].Rules
	require.Len(t, fast, len(def))
	number := regexp.MustCompile(`\d+(\.\d+)?[smh]?`)
	for i := range def {
		assert.Equal(t, def[i].Alert, fast[i].Alert)
		assert.Equal(t, number.ReplaceAllString(def[i].Expr, "N"), number.ReplaceAllString(fast[i].Expr, "N"), def[i].Alert)
		assert.Empty(t, fast[i].For, "For 0: fires at the first evaluation over the threshold")
	}
	assert.Contains(t, fast[0].Expr, "> 5")
}
