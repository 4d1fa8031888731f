package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestJSONLogsNameThePipelineStepAndHook: with --logging-format=json every line the
// operator writes is a JSON object, and a line about a hook has the pipeline, the step,
// the executor and the hook as keys, for a log pipeline to index.
func TestJSONLogsNameThePipelineStepAndHook(t *testing.T) {
	// Not parallel: it restarts the shared operator.
	restartOperator(t, append(pluginArgs(), "--logging-format=json", "-v=4")...)
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(t.Context(),
		recordPipeline(ns, "logged", "runner", recordStep("only", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "logged", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })

	f, err := os.Open(operator.Log)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var lines, hookLines int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		lines++
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "every line is a JSON object: %s", line)
		if entry["msg"] != "Hook called" || entry["pipeline"] != ns+"/logged" {
			continue
		}
		hookLines++
		assert.Equal(t, "only", entry["step"], "%s", line)
		assert.Equal(t, "test.record", entry["executor"], "%s", line)
		assert.Contains(t, []any{"PreCreate", "Create", "PostCreate"}, entry["hook"], "%s", line)
	}
	require.NoError(t, sc.Err())
	assert.Positive(t, lines)
	assert.Equal(t, 3, hookLines, "a line for each hook of the step: PreCreate, Create, PostCreate")
}
