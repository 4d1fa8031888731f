package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestAPluginInstalledFromItsOwnImage does what the chart's Pod does with a plugin listed
// in its values, without a node: the plugin's binary installs itself into a directory as
// its image's init container runs it (`stepwise-plugin-example install DIR`), the
// installer's checksum of it goes into a file as the chart's ConfigMap, and an operator
// whose image has no such plugin runs it; a swapped binary under the same name is refused.
func TestAPluginInstalledFromItsOwnImage(t *testing.T) {
	// Not parallel: it restarts the shared operator.
	ctx := t.Context()
	example := cluster.BinPath(filepath.Join("plugins", "stepwise-plugin-example"))
	installed := t.TempDir()
	out, err := exec.CommandContext(ctx, example, "install", installed).CombinedOutput()
	require.NoError(t, err, "%s", out)
	sum := sha256File(t, example)
	assert.Contains(t, string(out), "installed stepwise-plugin-example (sha256 "+sum+") into "+installed)

	// The installer's values, as the chart writes them: its sum, not the image's.
	sums := filepath.Join(t.TempDir(), "SHA256SUMS")
	require.NoError(t, os.WriteFile(sums, []byte(sum+"  stepwise-plugin-example\n"), 0o644))
	image := t.TempDir() // the operator's image, without the example plugin
	require.NoError(t, os.WriteFile(filepath.Join(image, "SHA256SUMS"), nil, 0o644))
	args := []string{"--plugin-dir", image, "--installed-plugin-dir", installed, "--installed-plugin-checksums", sums}
	restartOperator(t, args...)

	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "greet", "runner",
		v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{"name": "Ada"}}), metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitPipeline(t, ns, "greet", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	assert.Equal(t, "Hello, Ada!", p.Status.Steps[0].Outputs["greeting"])

	// A swapped image: another plugin's binary under the example's name. The checksum is
	// the installer's, so it is refused, and the executor is offered by no one.
	ticket := cluster.BinPath(filepath.Join("plugins", "stepwise-plugin-ticket"))
	data, err := os.ReadFile(ticket)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(installed, "stepwise-plugin-example"), data, 0o755))
	restartOperator(t, args...)
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "swapped", "runner",
		v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{"name": "Ada"}}), metav1.CreateOptions{})
	require.NoError(t, err)
	waiting := waitPipeline(t, ns, "swapped", time.Minute, func(p *v1alpha1.Pipeline) bool {
		if len(p.Status.Steps) == 0 {
			return false
		}
		step := meta.FindStatusCondition(p.Status.Steps[0].Conditions, v1alpha1.ConditionReady)
		return step != nil && step.Reason == v1alpha1.ReasonPluginRefused
	})
	assert.Equal(t, v1alpha1.PipelineRunning, waiting.Status.Phase, "it waits for a plugin that verifies")
	assert.Contains(t, waiting.Status.Steps[0].Message, "(ChecksumMismatch)")
	assert.Contains(t, waiting.Status.Steps[0].Message, sums, "the refusal names the installer's checksum file")
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
