package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/alerts"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// TestAnAlertFiresForADrainHeldByAPodDisruptionBudget: a real Prometheus (Debian's)
// scrapes the operator every second with the chart's alert rules, only with a threshold of
// seconds, and StepwisePipelineBlocked fires for the namespace whose drain a
// PodDisruptionBudget holds, with kind PodDisruptionBudget.
func TestAnAlertFiresForADrainHeldByAPodDisruptionBudget(t *testing.T) {
	// Not parallel: the operator's metrics address must not change under Prometheus.
	ctx := t.Context()
	require.NoError(t, operator.WaitReady(ctx), "the operator's metrics address is in its log once it serves")
	short := alerts.Default()
	short.Blocked, short.For = 3*time.Second, 0
	prom := startPrometheus(t, operator.MetricsURL, short)

	ns := cluster.CreateNamespace(t)
	sa := nodeRetirer(t, ns)
	node := poolNode(t, ns)
	webWithBudget(t, ns, ns, 2)
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		retirePipeline(ns, sa, node, map[string]string{"timeout": "5m"}), metav1.CreateOptions{})
	require.NoError(t, err)

	started := time.Now()
	var last []promv1.Alert
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		res, err := prom.Alerts(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // Prometheus may still be starting
		}
		last = res.Alerts
		for _, a := range res.Alerts {
			if a.State == promv1.AlertStateFiring && a.Labels["alertname"] == alerts.PipelineBlocked &&
				a.Labels["namespace"] == model.LabelValue(ns) && a.Labels["kind"] == "PodDisruptionBudget" {
				t.Logf("%s firing %s after the pipeline was created: %s", alerts.PipelineBlocked,
					time.Since(started).Round(time.Second), a.Annotations["description"])
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the alert did not fire; alerts: %+v", last)
}

// startPrometheus runs Debian's prometheus on loopback, scraping the operator's metrics
// every second with the alert rules of t, and stops it (by its PID) when the test ends.
func startPrometheus(t *testing.T, metricsURL string, th alerts.Thresholds) promv1.API {
	t.Helper()
	bin := os.Getenv("PROMETHEUS")
	if bin == "" {
		var err error
		bin, err = exec.LookPath("prometheus")
		require.NoError(t, err, "prometheus is missing: make prometheus installs Debian's package")
	}
	target, err := url.Parse(metricsURL)
	require.NoError(t, err)
	dir := t.TempDir()
	rules, err := alerts.YAML(th)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644))
	// Prometheus reads the metrics as a chart's would: over HTTPS, with the token of a
	// ServiceAccount bound to the install's stepwise-metrics-reader.
	require.NoError(t, cluster.InstallMetricsReaderRole(t.Context()))
	ns := cluster.CreateNamespace(t)
	cluster.ServiceAccount(t, ns, "prometheus")
	cluster.BindClusterWide(t, ns, "prometheus", framework.MetricsReaderRole)
	token, err := cluster.ServiceAccountToken(t.Context(), ns, "prometheus")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600))
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
- job_name: stepwise
  scheme: %s
  metrics_path: %q
  authorization: {credentials_file: %q}
  tls_config: {ca_file: %q}
  static_configs: [{targets: [%q]}]
`, filepath.Join(dir, "rules.yaml"), target.Scheme, target.Path, filepath.Join(dir, "token"), cluster.MetricsCAFile(), target.Host)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	address := lis.Addr().String()
	require.NoError(t, lis.Close())
	log, err := os.Create(filepath.Join(cluster.Dir, "logs", "prometheus.log"))
	require.NoError(t, err)
	defer func() { _ = log.Close() }()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+address, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	client, err := promapi.NewClient(promapi.Config{Address: "http://" + address})
	require.NoError(t, err)
	api := promv1.NewAPI(client)
	// Ready once the operator is a healthy target (Prometheus syncs its targets every 5 s).
	var targets promv1.TargetsResult
	err = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		targets, err = api.Targets(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		for _, tg := range targets.Active {
			if tg.Health == promv1.HealthGood {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "Prometheus never scraped the operator at %s: targets %+v (log: %s)", metricsURL, targets, log.Name())
	return api
}
