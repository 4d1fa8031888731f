package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

const (
	installNamespace = "stepwise-system"
	deployment       = "stepwise-operator"
)

// TestTheChartOnARealNode installs the chart as the README says, on the node, and goes on
// as a platform team would: a plugin from its own image, the leader's Pod deleted, and an
// upgrade to a new operator image while pipelines wait in a step. Each part needs the one
// before it.
func TestTheChartOnARealNode(t *testing.T) {
	blocks := readmeInstallCommands(t)
	require.Len(t, blocks, 2, "the README's \"Installing on a real cluster\" has the install and the plugin's commands")
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"install as the README says", func(t *testing.T) { installAsTheREADMESays(t, blocks[0]) }},
		{"a plugin from its own image", func(t *testing.T) { aPluginFromItsOwnImage(t, blocks[1]) }},
		{"a plugin signed by another key, then a re-pushed tag, refused; then installed by name", refusedThenInstalledByName},
		{"the leader's Pod deleted", theLeadersPodDeleted},
		{"an upgrade with pipelines in flight", anUpgradeWithPipelinesInFlight},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}

func installAsTheREADMESays(t *testing.T, commands string) {
	ctx := t.Context()
	started := time.Now()
	runCommands(t, commands)
	t.Logf("README's install: helm install to a rolled out Deployment in %s", time.Since(started).Round(100*time.Millisecond))

	pods := operatorPods(t)
	require.Len(t, pods, 2, "two replicas")
	for _, p := range pods {
		assert.Equal(t, "localnode", p.Spec.NodeName, "runs on the node that runs containers")
		assert.True(t, podReady(&p), "Pod %s Ready (its readiness probe answers)", p.Name)
		assert.Equal(t, registry+"/stepwise-operator:"+first.tag, p.Spec.Containers[0].Image)
		ready := readySince(&p)
		t.Logf("Pod %s Ready %s after it was created", p.Name, ready.Sub(p.CreationTimestamp.Time).Round(time.Second))
	}
	// Admitted in a namespace that enforces the restricted Pod Security Standard.
	ns, err := cluster.Client.CoreV1().Namespaces().Get(ctx, installNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])

	// One replica leads; the PodDisruptionBudget lets a drain take one at a time.
	leader := waitForLeader(t, "")
	assert.Contains(t, podNames(pods), leader, "a Pod of the Deployment holds the Lease")
	var allowed int32
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pdb, err := cluster.Client.PolicyV1().PodDisruptionBudgets(installNamespace).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		allowed = pdb.Status.DisruptionsAllowed
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 2, nil
	}), "the disruption controller counts both Pods healthy")
	assert.Equal(t, int32(1), allowed, "one Pod may be evicted at a time")
}

func aPluginFromItsOwnImage(t *testing.T, commands string) {
	// The node's containerd (Debian's 1.6) has no image volumes: the README's other way.
	runCommands(t, strings.Replace(commands, "--reuse-values", "--reuse-values --set pluginDelivery=initContainer", 1))
	for _, p := range operatorPods(t) {
		require.Len(t, p.Spec.InitContainers, 2, "Pod %s copies the plugin out of its image with the operator's tool", p.Name)
		init := p.Spec.InitContainers[1]
		assert.Equal(t, first.exampleImage, init.Image, "pinned by digest")
		assert.Equal(t, "/copy-tool/stepwise-copy", init.Command[0], "the plugin image's entrypoint does not run")
		assert.Equal(t, new(false), p.Spec.AutomountServiceAccountToken)
		for _, m := range init.VolumeMounts {
			assert.NotEqual(t, "/var/run/secrets/kubernetes.io/serviceaccount", m.MountPath, "the plugin's image gets no token")
		}
		assert.Contains(t, containerLog(t, p.Name, init.Name), "copied /stepwise-plugin-example.sigstore.json into /installed-plugins")
	}
	// The operator's image has no plugin: example.greet is there only from its own image.
	ns := tenant(t)
	p := createPipeline(t, ns, "greet", v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{"name": "Ada"}})
	done := waitForPipeline(t, ns, p.Name, 2*time.Minute, succeeded)
	assert.Equal(t, "Hello, Ada!", done.Status.Steps[0].Outputs["greeting"])
}

// refusedThenInstalledByName: the example plugin's policy names another key, then its image
// is a re-pushed tag (other code, the genuine signature): each time the operator refuses
// it saying why, in its catalogue and an Event, and a pipeline that needs it waits naming
// it; no log of any container of the operator's Pods has the re-pushed code's marker.
// Then the plugin is installed by name from the signed index make images wrote, and the
// waiting pipeline goes on.
func refusedThenInstalledByName(t *testing.T) {
	ns := tenant(t)

	// --set of a list's item replaces the list: the whole entry each time.
	runCommands(t, helmUpgrade(`--set plugins[0].name=example --set "plugins[0].image=$EXAMPLE_IMAGE" `+
		`--set-file "plugins[0].signature.publicKey=$OTHER_PUBLIC_KEY"`)+"\n"+rolloutStatus)
	waitForRefusal(t, v1alpha1.PluginSignedByAnother)
	createPipeline(t, ns, "waits", v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{"name": "Lin"}})
	waiting := waitForPipeline(t, ns, "waits", 2*time.Minute, waitsOnThePlugin)
	assert.Equal(t, "greet", waiting.Status.BlockedBy[0].Step)
	assert.Contains(t, waiting.Status.BlockedBy[0].Unblock, "kubectl stepwise executors")

	require.NoError(t, cluster.LoadImages(t.Context(), repushed))
	runCommands(t, helmUpgrade(`--set plugins[0].name=example --set-file "plugins[0].signature.publicKey=$PUBLIC_KEY" `+
		`--set "plugins[0].image=$REGISTRY/stepwise-plugin-example:$TAG" `+
		`--set "plugins[0].unpinnedImage=I accept that the tag may move to another build"`)+"\n"+rolloutStatus)
	waitForRefusal(t, v1alpha1.PluginSignedOtherContent)
	for _, p := range operatorPods(t) {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			assert.NotContains(t, containerLog(t, p.Name, c.Name), repushedMarker, "the re-pushed code ran in %s/%s", p.Name, c.Name)
		}
	}
	waitForPipeline(t, ns, "waits", 2*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return waitsOnThePlugin(p) && strings.Contains(p.Status.Steps[0].Message, string(v1alpha1.PluginSignedOtherContent))
	})

	// Not t.TempDir: its path has the test's name, commas included, and helm -f splits
	// its argument at commas.
	dir, err := os.MkdirTemp("", "stepwise-values-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	values := filepath.Join(dir, "values.yaml")
	runCommands(t, "kubectl stepwise plugin install example --index $PLUGIN_INDEX --index-key $PUBLIC_KEY --values "+values+"\n"+
		helmUpgrade("-f "+values)+"\n"+rolloutStatus)
	done := waitForPipeline(t, ns, "waits", 2*time.Minute, succeeded)
	assert.Equal(t, "Hello, Lin!", done.Status.Steps[0].Outputs["greeting"])
	for _, p := range operatorPods(t) {
		assert.Equal(t, first.exampleImage, p.Spec.InitContainers[1].Image, "the index's image, by digest")
	}
}

// waitsOnThePlugin: the pipeline's step waits on the refused example plugin.
func waitsOnThePlugin(p *v1alpha1.Pipeline) bool {
	ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	return ready != nil && ready.Reason == v1alpha1.ReasonPluginRefused && len(p.Status.BlockedBy) > 0 &&
		p.Status.BlockedBy[0].Kind == v1alpha1.BlockerPlugin && p.Status.BlockedBy[0].Name == "stepwise-plugin-example"
}

// waitForRefusal waits until the operator's catalogue says it refused the example plugin
// for reason, and a Warning Event on the catalogue says so.
func waitForRefusal(t *testing.T, reason v1alpha1.PluginRefusalReason) {
	t.Helper()
	var last any
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cat, err := catalog.Read(ctx, cluster.Client, installNamespace, catalog.DefaultName)
		if err != nil {
			last = err
			return false, nil
		}
		last = cat.RefusedPlugins
		if !slices.ContainsFunc(cat.RefusedPlugins, func(r executor.Refusal) bool {
			return r.Plugin == "stepwise-plugin-example" && r.Reason == reason
		}) {
			return false, nil
		}
		events, err := cluster.Client.CoreV1().Events(installNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=" + catalog.DefaultName + ",reason=" + v1alpha1.ReasonPluginRefused})
		if err != nil {
			return false, err
		}
		last = events.Items
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "plugin stepwise-plugin-example refused ("+string(reason)+")")
		}), nil
	})
	require.NoError(t, err, "no refusal %s of the example plugin in the catalogue and its Events; last: %v", reason, last)
}

// containerLog is the log of a container of an operator's Pod.
func containerLog(t *testing.T, pod, container string) string {
	t.Helper()
	data, err := cluster.Client.CoreV1().Pods(installNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(t.Context())
	require.NoError(t, err, "the log of %s/%s", pod, container)
	return string(data)
}

func theLeadersPodDeleted(t *testing.T) {
	ctx := t.Context()
	leader := waitForLeader(t, "")
	deleted := time.Now()
	require.NoError(t, cluster.Client.CoreV1().Pods(installNamespace).Delete(ctx, leader, metav1.DeleteOptions{}))
	next := waitForLeader(t, leader)
	t.Logf("the Lease went from %s to %s %s after the leader's Pod was deleted", leader, next, time.Since(deleted).Round(100*time.Millisecond))
	assert.NotEqual(t, leader, next)
	// The new leader runs pipelines.
	ns := tenant(t)
	createPipeline(t, ns, "after-failover", v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{"name": "Grace"}})
	waitForPipeline(t, ns, "after-failover", 2*time.Minute, succeeded)
	runCommands(t, "kubectl -n "+installNamespace+" rollout status deployment/"+deployment+" --timeout=5m")
}

// anUpgradeWithPipelinesInFlight upgrades the chart to the second image while pipelines
// wait in their second step, then lets them go on: each finishes, and no hook of any step
// ran twice, before or after the new operator took over.
func anUpgradeWithPipelinesInFlight(t *testing.T) {
	ctx := t.Context()
	// test.record's gate holds a step until the test opens it, and records every hook.
	runCommands(t, helmUpgrade(`--set "extraArgs={--enable-test-executors}"`)+"\n"+rolloutStatus)
	ns := tenant(t)
	const pipelines = 4
	var names []string
	for i := range pipelines {
		name := fmt.Sprintf("in-flight-%d", i)
		names = append(names, name)
		createPipeline(t, ns, name,
			v1alpha1.Step{Name: "before", Executor: "test.record"},
			v1alpha1.Step{Name: "hold", Executor: "test.record", With: map[string]string{"gate": "true"}},
			v1alpha1.Step{Name: "after", Executor: "test.record"})
	}
	for _, name := range names {
		waitForPipeline(t, ns, name, 2*time.Minute, func(p *v1alpha1.Pipeline) bool {
			return len(p.Status.Steps) == 3 && p.Status.Steps[0].Phase == v1alpha1.StepSucceeded && p.Status.Steps[1].Phase == v1alpha1.StepRunning
		})
	}

	started := time.Now()
	runCommands(t, helmUpgrade("--set image.tag="+second.tag)+"\n"+rolloutStatus)
	t.Logf("upgrade to %s rolled out in %s with %d pipelines waiting", second.tag, time.Since(started).Round(100*time.Millisecond), pipelines)
	for _, p := range operatorPods(t) {
		assert.Equal(t, registry+"/stepwise-operator:"+second.tag, p.Spec.Containers[0].Image)
	}

	for _, name := range names {
		require.NoError(t, framework.OpenGate(ctx, cluster.Client, ns, "stepwise-record-"+name, "hold", "true"))
	}
	for _, name := range names {
		waitForPipeline(t, ns, name, 2*time.Minute, succeeded)
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "stepwise-record-"+name, metav1.GetOptions{})
		require.NoError(t, err)
		calls := strings.Split(cm.Data["calls"], "\n")
		for _, once := range []string{"before/PreCreate", "before/Create", "before/PostCreate", "hold/PreCreate", "hold/PostCreate",
			"after/PreCreate", "after/Create", "after/PostCreate"} {
			assert.Equal(t, 1, framework.Count(calls, once), "%s: %s ran once (calls: %v)", name, once, calls)
		}
		assert.Positive(t, framework.Count(calls, "hold/Create"), "%s: the gated Create ran (it records every look at its gate)", name)
	}
}

const rolloutStatus = "kubectl -n " + installNamespace + " rollout status deployment/" + deployment + " --timeout=5m"

func helmUpgrade(args string) string {
	return "helm upgrade stepwise charts/stepwise -n " + installNamespace + " --reuse-values " + args
}

// readmeInstallCommands returns the shell blocks of the README's "Installing on a real
// cluster", in order: what a user types.
func readmeInstallCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Root(), "README.md"))
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n## Installing on a real cluster\n")
	require.True(t, found, "README.md has a section \"Installing on a real cluster\"")
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	var block *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block == nil && line == "```sh":
			block = &strings.Builder{}
		case block != nil && line == "```":
			blocks = append(blocks, block.String())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		}
	}
	return blocks
}

// runCommands runs shell commands as a user at the repository's root would, with kubectl
// and helm on the PATH, the cluster's kubeconfig, and the README's variables set to the
// images loaded into the node.
func runCommands(t *testing.T, commands string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	tools := t.TempDir()
	helm, err := cluster.Helm()
	require.NoError(t, err)
	require.NoError(t, os.Symlink(helm, filepath.Join(tools, "helm")))
	require.NoError(t, os.Symlink(cluster.BinPath("kubectl"), filepath.Join(tools, "kubectl")))
	require.NoError(t, os.Symlink(cluster.BinPath("kubectl-stepwise"), filepath.Join(tools, "kubectl-stepwise")))
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", commands)
	cmd.Dir = cluster.Root()
	cmd.Env = append(os.Environ(),
		"PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cluster.Kubeconfig,
		"REGISTRY="+registry, "TAG="+first.tag, "EXAMPLE_IMAGE="+first.exampleImage, "PUBLIC_KEY="+publicKey,
		"OTHER_PUBLIC_KEY="+otherPublicKey, "PLUGIN_INDEX="+first.index)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\n%s", commands, out)
}

// tenant makes a namespace whose ServiceAccount runner may do what test.record does.
func tenant(t *testing.T) string {
	t.Helper()
	ns := cluster.CreateNamespace(t)
	cluster.ServiceAccount(t, ns, "runner",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})
	return ns
}

func createPipeline(t *testing.T, ns, name string, steps ...v1alpha1.Step) *v1alpha1.Pipeline {
	t.Helper()
	p, err := stepwise(t).StepwiseV1alpha1().Pipelines(ns).Create(t.Context(), &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.PipelineSpec{ServiceAccountName: "runner", Steps: steps},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return p
}

func succeeded(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded }

func waitForPipeline(t *testing.T, ns, name string, timeout time.Duration, cond func(*v1alpha1.Pipeline) bool) *v1alpha1.Pipeline {
	t.Helper()
	client := stepwise(t)
	return framework.PollObject(t, timeout, func(ctx context.Context) (*v1alpha1.Pipeline, error) {
		return client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, name, metav1.GetOptions{})
	}, cond, statusOf, fmt.Sprintf("pipeline %s/%s (the operator's logs: %s)", ns, name, filepath.Join(cluster.Dir, "logs", "pods")))
}

func statusOf(p *v1alpha1.Pipeline) any {
	if p == nil {
		return nil
	}
	return p.Status
}

func stepwise(t *testing.T) clientset.Interface {
	t.Helper()
	c, err := clientset.NewForConfig(cluster.Config)
	require.NoError(t, err)
	return c
}

// operatorPods are the Deployment's running Pods, once the rollout left only the new ones.
func operatorPods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := cluster.Client.CoreV1().Pods(installNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + deployment})
	require.NoError(t, err)
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

// waitForLeader waits until a Pod other than not holds the operator's Lease and returns
// its name.
func waitForLeader(t *testing.T, not string) string {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := cluster.Client.CoordinationV1().Leases(installNamespace).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not made yet: keep waiting
		}
		// The identity is the Pod's host name, then the process.
		holder, _, _ = strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
		return holder != "" && holder != not, nil
	})
	require.NoError(t, err, "a replica other than %q holds the Lease (last holder %q)", not, holder)
	return holder
}

func podReady(p *corev1.Pod) bool { return !readySince(p).IsZero() }

func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}
