package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/vcsim"
)

const (
	vcsimUser     = "retirer@vsphere.local"
	vcsimPassword = "e2e-vcsim-password"
)

func startVCenterSim(t *testing.T) *vcsim.Simulator {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim, err := vcsim.Start(ctx, vcsim.Options{Username: vcsimUser, Password: vcsimPassword})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sim.Close(ctx)
	})
	return sim
}

// poweredOnVM returns a powered-on VM of the simulator.
func poweredOnVM(t *testing.T, sim *vcsim.Simulator) vcsim.VM {
	t.Helper()
	vms, err := sim.VMs(t.Context())
	require.NoError(t, err)
	for _, vm := range vms {
		if vm.PowerState == types.VirtualMachinePowerStatePoweredOn {
			return vm
		}
	}
	t.Fatal("the simulator has no powered-on VM")
	return vcsim.VM{}
}

// vmExists tells whether the VM is still in the simulator's inventory.
func vmExists(t *testing.T, sim *vcsim.Simulator, vm vcsim.VM) bool {
	t.Helper()
	ok, err := sim.Exists(t.Context(), vm.Ref)
	require.NoError(t, err)
	return ok
}

// vsphereRetirer is nodeRetirer plus reading Secrets in its namespace: the operator reads
// the credentials Secret as the pipeline's ServiceAccount.
func vsphereRetirer(t *testing.T, ns string) string {
	t.Helper()
	sa := nodeRetirer(t, ns)
	cluster.Grant(t, ns, sa, "read-vsphere-creds", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"},
		ResourceNames: []string{"vsphere-creds"},
	})
	return sa
}

func vsphereCredentials(t *testing.T, ns string, sim *vcsim.Simulator, password string) {
	t.Helper()
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "vsphere-creds"},
		Data: map[string][]byte{
			"url": []byte(sim.URL), "username": []byte(vcsimUser), "password": []byte(password), "ca.crt": sim.CA,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// vsphereNode is a kwok node whose providerID names the VM, as the vSphere cloud provider
// sets it, and the VM renamed after the node, as a cluster's VMs are named after its nodes
// (vsphere.terminate-vm destroys a VM only when it is the node's).
func vsphereNode(t *testing.T, ns string, sim *vcsim.Simulator, vm vcsim.VM) string {
	t.Helper()
	node := poolNode(t, ns)
	_, err := sim.Rename(t.Context(), vm, node, vm.UUID)
	require.NoError(t, err)
	return nodeClaiming(t, node, vm)
}

// nodeClaiming sets node's providerID to the VM's, whatever the VM is named.
func nodeClaiming(t *testing.T, node string, vm vcsim.VM) string {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"providerID":%q}}`, "vsphere://"+vm.UUID)
	_, err := cluster.Client.CoreV1().Nodes().Patch(t.Context(), node, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	return node
}

func vsphereRetirePipeline(ns, sa, node string) *v1alpha1.Pipeline {
	onNode := map[string]string{"node": "$(params.node)"}
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: ns},
		Spec: v1alpha1.PipelineSpec{
			ServiceAccountName: sa,
			Params:             map[string]string{"node": node},
			Steps: []v1alpha1.Step{
				{Name: "cordon", Executor: "node.cordon", With: onNode},
				{Name: "drain", Executor: "node.drain", With: map[string]string{"node": "$(params.node)", "timeout": "1m"}},
				{Name: "terminate", Executor: "vsphere.terminate-vm", With: map[string]string{
					"providerID":        "$(steps.cordon.outputs.providerID)",
					"node":              "$(params.node)",
					"credentialsSecret": "vsphere-creds",
					"shutdownTimeout":   "1m",
				}},
				{Name: "forget", Executor: "node.delete", With: onNode},
			},
		},
	}
}

func TestVSphereNodeRetirementDestroysTheVM(t *testing.T) {
	ctx := t.Context()
	sim := startVCenterSim(t)
	vm := poweredOnVM(t, sim)
	require.NoError(t, sim.SetToolsRunning(vm.Ref))
	ns := cluster.CreateNamespace(t)
	sa := vsphereRetirer(t, ns)
	vsphereCredentials(t, ns, sim, vcsimPassword)
	node := vsphereNode(t, ns, sim, vm)

	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, vsphereRetirePipeline(ns, sa, node), metav1.CreateOptions{})
	require.NoError(t, err)

	out, err := kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", ns, "pipeline/retire")
	require.NoError(t, err, "kubectl wait: %s (operator log %s)", out, operator.Log)
	got := waitPipeline(t, ns, "retire", 10*time.Second, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })

	require.Len(t, got.Status.Steps, 4)
	terminate := got.Status.Steps[2]
	assert.Equal(t, "vsphere://"+vm.UUID, got.Status.Steps[0].Outputs["providerID"])
	assert.Equal(t, vm.UUID, terminate.Outputs["instanceID"])
	assert.Equal(t, "poweredOn", terminate.Outputs["previousPowerState"])
	assert.NotContains(t, terminate.Message, "powered off", "the guest was asked to shut down first, and did")
	assert.False(t, vmExists(t, sim, vm), "the VM is gone from vCenter")
	_, err = cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "node.delete removed the Node")
}

func TestVSphereWrongPasswordFailsTheStepAtOnce(t *testing.T) {
	ctx := t.Context()
	sim := startVCenterSim(t)
	vm := poweredOnVM(t, sim)
	ns := cluster.CreateNamespace(t)
	sa := vsphereRetirer(t, ns)
	const wrong = "not-the-password"
	vsphereCredentials(t, ns, sim, wrong)
	node := vsphereNode(t, ns, sim, vm)

	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, vsphereRetirePipeline(ns, sa, node), metav1.CreateOptions{})
	require.NoError(t, err)
	failed := waitPipeline(t, ns, "retire", 2*time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })

	require.Len(t, failed.Status.Steps, 4)
	terminate := failed.Status.Steps[2]
	assert.Equal(t, int32(1), terminate.Attempts, "a refused login is not retried")
	c := meta.FindStatusCondition(terminate.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c)
	assert.Equal(t, "InvalidCredentials", c.Reason)
	assert.Contains(t, c.Message, "refused the login")
	ready := meta.FindStatusCondition(failed.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.NotContains(t, fmt.Sprintf("%+v", failed.Status), wrong, "the password is in no status")
	assert.Equal(t, v1alpha1.StepPending, failed.Status.Steps[3].Phase, "the Node is not forgotten")
	assert.True(t, vmExists(t, sim, vm), "the VM is untouched")
	_, err = cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	assert.NoError(t, err, "the Node stays")
}

// TestANodeClaimingAnotherNodesVMCannotHaveItDestroyed: a kubelet chooses its Node's
// providerID. A Node that claims the VM of another node (a compromised node, a bootstrap
// token) and is retired does not get that VM destroyed: the step fails VMNotTheNodes, and
// the VM stays, powered on.
func TestANodeClaimingAnotherNodesVMCannotHaveItDestroyed(t *testing.T) {
	ctx := t.Context()
	sim := startVCenterSim(t)
	vm := poweredOnVM(t, sim)
	ns := cluster.CreateNamespace(t)
	sa := vsphereRetirer(t, ns)
	vsphereCredentials(t, ns, sim, vcsimPassword)
	victim := vsphereNode(t, ns, sim, vm)            // the VM is named after its node
	impostor := nodeClaiming(t, poolNode(t, ns), vm) // another Node, the same providerID

	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, vsphereRetirePipeline(ns, sa, impostor), metav1.CreateOptions{})
	require.NoError(t, err)
	failed := waitPipeline(t, ns, "retire", 2*time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	terminate := failed.Status.Steps[2]
	c := meta.FindStatusCondition(terminate.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c)
	assert.Equal(t, "VMNotTheNodes", c.Reason)
	assert.Contains(t, c.Message, victim)
	assert.True(t, vmExists(t, sim, vm), "the victim's VM is untouched")
}
