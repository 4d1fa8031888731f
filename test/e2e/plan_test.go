package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// planned waits until the dry run ns/name is Planned, and returns it.
func planned(t *testing.T, ns, name string) *v1alpha1.Pipeline {
	t.Helper()
	return waitPipeline(t, ns, name, 2*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelinePlanned || p.Status.Phase == v1alpha1.PipelineFailed
	})
}

// rows returns a step's plan rows as "Kind Name Action".
func rows(t *testing.T, p *v1alpha1.Pipeline, step string) []string {
	t.Helper()
	s := stepStatus(p, step)
	require.NotNil(t, s.Plan, "step %s has a plan: %+v", step, s)
	var out []string
	for _, d := range s.Plan.Details {
		out = append(out, d.Kind+" "+d.Name+" "+d.Action)
	}
	return out
}

func stepStatus(p *v1alpha1.Pipeline, name string) v1alpha1.StepStatus {
	for _, s := range p.Status.Steps {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.StepStatus{}
}

// deleteAndWaitGone deletes a pipeline and waits until it is gone.
func deleteAndWaitGone(t *testing.T, ns, name string) {
	t.Helper()
	client := stepwiseClient(t)
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(t.Context(), name, metav1.DeleteOptions{}))
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pipeline %s/%s is gone", ns, name)
}

// TestPlanOfNodeRetirementTouchesNothingThenTheRunDoesWhatItSaid: the plan of a node's
// retirement (cordon, drain, vSphere VM, delete) names every pod the drain would evict and
// the PodDisruptionBudget that would hold some back, and the VM with its power state, while
// nothing is cordoned, evicted, powered off or deleted; then the run evicts those pods and
// destroys that VM.
func TestPlanOfNodeRetirementTouchesNothingThenTheRunDoesWhatItSaid(t *testing.T) {
	ctx := t.Context()
	sim := startVCenterSim(t)
	vm := poweredOnVM(t, sim)
	require.NoError(t, sim.SetToolsRunning(vm.Ref))
	ns := cluster.CreateNamespace(t)
	sa := vsphereRetirer(t, ns)
	cluster.GrantClusterWide(t, ns, sa, "read-budgets-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"list"}})
	vsphereCredentials(t, ns, sim, vcsimPassword)
	node := vsphereNode(t, ns, sim, vm)
	webWithBudget(t, ns, ns, 2) // 3 pods on the node; the budget lets one go at a time
	podsBefore := podNodes(t, ns)
	require.Len(t, podsBefore, 3)

	plan := vsphereRetirePipeline(ns, sa, node)
	plan.Name, plan.Spec.DryRun = "retire-plan", true
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, plan, metav1.CreateOptions{})
	require.NoError(t, err)
	got := planned(t, ns, "retire-plan")
	require.Equal(t, v1alpha1.PipelinePlanned, got.Status.Phase, "status: %+v", got.Status)
	assert.Empty(t, got.Finalizers)

	assert.Equal(t, []string{"Node " + node + " cordon"}, rows(t, got, "cordon"))
	assert.Equal(t, "vsphere://"+vm.UUID, stepStatus(got, "cordon").Outputs["providerID"], "an output the next step's plan used")
	var evicted []string
	for pod := range podsBefore {
		evicted = append(evicted, "Pod "+ns+"/"+pod+" evict")
	}
	drain := rows(t, got, "drain")
	for _, row := range evicted {
		assert.Contains(t, drain, row)
	}
	assert.True(t, slices.ContainsFunc(drain, func(r string) bool { return strings.HasPrefix(r, "PodDisruptionBudget "+ns+"/web-pdb ") }), "drain rows: %v", drain)
	drainPlan := stepStatus(got, "drain").Plan
	require.NotEmpty(t, drainPlan.Warnings, "the budget holds pods back")
	assert.Contains(t, strings.Join(drainPlan.Warnings, "\n"), "web-pdb")
	terminate := stepStatus(got, "terminate").Plan
	require.Len(t, terminate.Details, 1)
	assert.Contains(t, terminate.Details[0].Name, node, "the VM, named after its node")
	assert.Contains(t, terminate.Details[0].Note, "poweredOn")
	assert.Equal(t, []string{"Node " + node + " delete"}, rows(t, got, "forget"))

	// Nothing was touched.
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, n.Spec.Unschedulable, "not cordoned")
	assert.Equal(t, podsBefore, podNodes(t, ns), "no pod evicted")
	assert.True(t, vmExists(t, sim, vm), "the VM is there")
	vms, err := sim.VMs(ctx)
	require.NoError(t, err)
	for _, v := range vms {
		if v.Ref == vm.Ref {
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, v.PowerState, "still powered on")
		}
	}
	deleteAndWaitGone(t, ns, "retire-plan") // no teardown to run

	// The same, as a user asks it: kubectl stepwise plan -f on the manifest of the run.
	manifest, err := sigsyaml.Marshal(vsphereRetirePipeline(ns, sa, node))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "retire.yaml")
	require.NoError(t, os.WriteFile(file, append([]byte("apiVersion: stepwise.dev/v1alpha1\nkind: Pipeline\n"), manifest...), 0o600))
	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "plan", "-f", file, "-n", ns)
	t.Logf("kubectl stepwise plan -f retire.yaml:\n%s", out)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Contains(t, out, "Plan of pipeline "+ns+"/retire: Planned, 4 steps")
	assert.Regexp(t, `(?m)^cordon +node\.cordon +cordon node `+node+`$`, out)
	assert.Contains(t, out, "PodDisruptionBudget")
	assert.Contains(t, out, "! pod "+ns+"/")
	assert.Contains(t, out, "vsphere.terminate-vm")
	planLeft, err := client.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{LabelSelector: "stepwise.dev/plan=true"})
	require.NoError(t, err)
	for _, p := range planLeft.Items {
		assert.NotNil(t, p.DeletionTimestamp, "the dry run %s is deleted", p.Name)
	}
	n, err = cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, n.Spec.Unschedulable, "still not cordoned")

	// The run does what the plan said, once the pods have somewhere to go.
	poolNode(t, ns)
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, vsphereRetirePipeline(ns, sa, node), metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitPipeline(t, ns, "retire", 3*time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	assert.Equal(t, "3", stepStatus(done, "drain").Outputs["podsEvicted"], "the three pods the plan named")
	assert.False(t, vmExists(t, sim, vm), "the VM the plan named is destroyed")
}

// TestPlanOfTheWebAppSaysCreateThenUnchangedThenChanged: on an empty namespace the plan of
// the WebApp example creates each object; after the run the same plan finds them
// unchanged; with the replicas edited it says spec.replicas changes.
func TestPlanOfTheWebAppSaysCreateThenUnchangedThenChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	node := webappNode(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	objs := webappExample(t, ns, node)
	createAll(t, dyn, objs[:3]) // ServiceAccount, Role, RoleBinding
	var webapp v1alpha1.Pipeline
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[3].Object, &webapp))
	client := stepwiseClient(t)

	planOf := func(name string, edit func(*v1alpha1.Pipeline)) *v1alpha1.Pipeline {
		t.Helper()
		p := webapp.DeepCopy()
		p.Name, p.Spec.DryRun = name, true
		p.Annotations = map[string]string{v1alpha1.PlanAsAnnotation: webapp.Name}
		if edit != nil {
			edit(p)
		}
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		got := planned(t, ns, name)
		require.Equal(t, v1alpha1.PipelinePlanned, got.Status.Phase, "status: %+v", got.Status)
		return got
	}

	first := planOf("plan-1", nil)
	assert.Equal(t, []string{"Deployment " + ns + "/web create"}, rows(t, first, "deployment"))
	assert.Equal(t, []string{"Service " + ns + "/web create"}, rows(t, first, "service"))
	_, err = dyn.Resource(deploymentsGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the plan created nothing")

	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, &webapp, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, webapp.Name, 3*time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })

	second := planOf("plan-2", nil)
	assert.Equal(t, []string{"Deployment " + ns + "/web unchanged"}, rows(t, second, "deployment"))
	assert.Equal(t, []string{"Service " + ns + "/web unchanged"}, rows(t, second, "service"))

	third := planOf("plan-3", func(p *v1alpha1.Pipeline) { setDeploymentReplicas(t, p, 3) })
	assert.Equal(t, []string{"Deployment " + ns + "/web change"}, rows(t, third, "deployment"))
	assert.Contains(t, stepStatus(third, "deployment").Plan.Details[0].Note, "spec.replicas")
	d, err := dyn.Resource(deploymentsGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	assert.Equal(t, int64(2), replicas, "the plan changed nothing")
}

// setDeploymentReplicas sets spec.replicas of the Deployment in the manifest of the
// pipeline's "deployment" step.
func setDeploymentReplicas(t *testing.T, p *v1alpha1.Pipeline, replicas int64) {
	t.Helper()
	for i, step := range p.Spec.Steps {
		if step.Name != "deployment" {
			continue
		}
		var deployment map[string]any
		require.NoError(t, sigsyaml.Unmarshal([]byte(step.With["manifest"]), &deployment))
		require.NoError(t, unstructured.SetNestedField(deployment, replicas, "spec", "replicas"))
		manifest, err := sigsyaml.Marshal(deployment)
		require.NoError(t, err)
		p.Spec.Steps[i].With["manifest"] = string(manifest)
		return
	}
	t.Fatal(`the example has no step "deployment"`)
}
