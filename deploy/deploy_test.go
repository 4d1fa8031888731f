// Package deploy_test checks the install manifests without a cluster: they build with
// kustomize, carry the CRD the API types generate, and keep the operator's Deployment
// hardened and its RBAC narrow; the namespaced variant (namespaced/) grants no
// impersonation but what its per-tenant Role does. test/e2e applies the default install
// to a real API server.
package deploy_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/trigger"
)

// build runs kustomize on this directory (the default install) and returns the objects by
// "Kind/name".
func build(t *testing.T) map[string][]byte {
	t.Helper()
	return buildDir(t, ".")
}

// buildDir runs kustomize on dir and returns the objects by "Kind/name".
func buildDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err)
	objs := map[string][]byte{}
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		require.NoError(t, err)
		objs[r.GetKind()+"/"+r.GetName()] = data
	}
	return objs
}

func decode[T any](t *testing.T, objs map[string][]byte, key string) *T {
	t.Helper()
	data, ok := objs[key]
	require.True(t, ok, "kustomize build has %s", key)
	var obj T
	require.NoError(t, yaml.UnmarshalStrict(data, &obj), key)
	return &obj
}

func TestObjects(t *testing.T) {
	var keys []string
	for k := range build(t) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{
		"ClusterRole/stepwise-approver",
		"ClusterRole/stepwise-edit",
		"ClusterRole/stepwise-metrics-reader",
		"ClusterRole/stepwise-operator",
		"ClusterRole/stepwise-view",
		"ClusterRoleBinding/stepwise-operator",
		"CustomResourceDefinition/approvals.stepwise.dev",
		"CustomResourceDefinition/drainrules.stepwise.dev",
		"CustomResourceDefinition/nodebudgets.stepwise.dev",
		"CustomResourceDefinition/pipelines.stepwise.dev",
		"CustomResourceDefinition/pipelinetemplates.stepwise.dev",
		"CustomResourceDefinition/pipelinetriggers.stepwise.dev",
		"Deployment/stepwise-operator",
		"MutatingAdmissionPolicy/stepwise-created-by",
		"MutatingAdmissionPolicyBinding/stepwise-created-by",
		"Namespace/stepwise-system",
		"PodDisruptionBudget/stepwise-operator",
		"Role/stepwise-executors-reader",
		"Role/stepwise-operator",
		"RoleBinding/stepwise-executors-reader",
		"RoleBinding/stepwise-operator",
		"Service/stepwise-operator-metrics",
		"ServiceAccount/stepwise-operator",
		"ValidatingAdmissionPolicy/stepwise-approval-identity",
		"ValidatingAdmissionPolicy/stepwise-created-by",
		"ValidatingAdmissionPolicy/stepwise-trigger-identity",
		"ValidatingAdmissionPolicyBinding/stepwise-approval-identity",
		"ValidatingAdmissionPolicyBinding/stepwise-created-by",
		"ValidatingAdmissionPolicyBinding/stepwise-trigger-identity",
	}, keys)
}

func TestDeploymentIsHardened(t *testing.T) {
	d := decode[appsv1.Deployment](t, build(t), "Deployment/stepwise-operator")
	assert.Equal(t, "stepwise-system", d.Namespace)
	require.NotNil(t, d.Spec.Replicas)
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	pod := d.Spec.Template.Spec
	assert.Equal(t, "stepwise-operator", pod.ServiceAccountName)
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, new(true), pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.SecurityContext.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)

	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "stepwise-operator:latest", c.Image)
	assert.Contains(t, c.Args, "--leader-elect=true")
	assert.Contains(t, c.Args, "--plugin-dir=/usr/local/lib/stepwise/plugins")
	assert.Contains(t, c.Args, "--plugin-checksums=/usr/local/lib/stepwise/plugins/SHA256SUMS")
	assert.Contains(t, c.Args, "--trigger-resources="+trigger.DefaultResources, "stated where an installer changes it")
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, new(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, new(true), c.SecurityContext.ReadOnlyRootFilesystem)
	require.NotNil(t, c.SecurityContext.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "health", c.LivenessProbe.HTTPGet.Port.String())
	assert.False(t, c.Resources.Requests.Cpu().IsZero())
	assert.False(t, c.Resources.Requests.Memory().IsZero())
	assert.False(t, c.Resources.Limits.Memory().IsZero())
	assert.True(t, slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}), "the operator learns its namespace")
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: "256MiB"}, "the operator's share of the memory limit")
	assert.True(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" }),
		"plugins need a writable /tmp for their sockets and the copies they run from")
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "tmp" {
			require.NotNil(t, v.EmptyDir.SizeLimit)
			assert.GreaterOrEqual(t, v.EmptyDir.SizeLimit.Value(), int64(2*100<<20),
				"room for two sets of plugin copies (a container restarted after SIGKILL removes the last one's)")
		}
	}
}

func TestOperatorRBACIsNarrow(t *testing.T) {
	objs := build(t)
	cr := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/stepwise-operator")
	role := decode[rbacv1.Role](t, objs, "Role/stepwise-operator")
	allowed := map[string][]string{} // group/resource -> verbs
	for _, r := range append(slices.Clone(cr.Rules), role.Rules...) {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				assert.NotEqual(t, "*", res)
				allowed[g+"/"+res] = append(allowed[g+"/"+res], r.Verbs...)
			}
		}
		assert.NotContains(t, r.Verbs, "*")
		assert.NotContains(t, r.APIGroups, "*")
	}
	for _, forbidden := range []string{"/pods", "/pods/eviction", "/secrets", "apps/deployments", "/users", "/groups", "/nodes/status"} {
		assert.NotContains(t, allowed, forbidden, "the executors act as the pipeline's ServiceAccount, not as the operator")
	}
	assert.Equal(t, []string{"impersonate"}, allowed["/serviceaccounts"])
	// Triggers create and delete their pipelines; the engine patches the finalizer, a
	// trigger a Rerun pipeline's params.
	assert.ElementsMatch(t, []string{"get", "list", "watch", "patch", "create", "delete"}, allowed["stepwise.dev/pipelines"])
	assert.Equal(t, []string{"update"}, allowed["stepwise.dev/pipelines/status"])
	assert.ElementsMatch(t, []string{"list", "watch", "patch"}, allowed["stepwise.dev/pipelinetriggers"], "patch: the finalizer of a trigger that taints nodes")
	assert.Equal(t, []string{"update"}, allowed["stepwise.dev/pipelinetriggers/status"])
	assert.ElementsMatch(t, []string{"list", "watch"}, allowed["stepwise.dev/pipelinetemplates"])
	assert.Equal(t, []string{"create"}, allowed["authorization.k8s.io/subjectaccessreviews"],
		"whether a trigger's ServiceAccount may list and watch its kind")
	for _, res := range []string{"roles", "rolebindings", "clusterroles", "clusterrolebindings"} {
		assert.ElementsMatch(t, []string{"list", "watch"}, allowed["rbac.authorization.k8s.io/"+res], "to ask again when RBAC changes")
	}
	// The kinds triggers watch, read only: whatever is done to them, a pipeline does as its
	// ServiceAccount.
	assert.ElementsMatch(t, []string{"list", "watch"}, allowed["/nodes"])
	assert.ElementsMatch(t, []string{"list", "watch"}, allowed["demo.stepwise.dev/webapps"])
	assert.Equal(t, []string{"list", "watch"}, allowed["/namespaces"], "to know a namespace being deleted")
	assert.Equal(t, "stepwise-system", role.Namespace, "the Lease and catalogue rights are namespaced")
}

// The example egress NetworkPolicy is valid, selects the operator's pods, and is left out
// of the install: it needs the cluster's API server address and allowed networks.
func TestEgressNetworkPolicyExample(t *testing.T) {
	data, err := os.ReadFile("networkpolicy-egress.yaml")
	require.NoError(t, err)
	var np networkingv1.NetworkPolicy
	require.NoError(t, yaml.UnmarshalStrict(data, &np))
	assert.Equal(t, "stepwise-system", np.Namespace)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)

	d := decode[appsv1.Deployment](t, build(t), "Deployment/stepwise-operator")
	for k, v := range np.Spec.PodSelector.MatchLabels {
		assert.Equal(t, v, d.Spec.Template.Labels[k], "the policy selects the operator's pods")
	}
	_, inInstall := build(t)["NetworkPolicy/"+np.Name]
	assert.False(t, inInstall, "the example is not in kustomization.yaml")

	dns, internet := false, false
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			dns = dns || p.Port.IntValue() == 53
		}
		for _, peer := range rule.To {
			if peer.IPBlock != nil && peer.IPBlock.CIDR == "0.0.0.0/0" {
				internet = true
				for _, private := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10"} {
					assert.Contains(t, peer.IPBlock.Except, private)
				}
			}
		}
	}
	assert.True(t, dns, "DNS is allowed")
	assert.True(t, internet, "the internet but private ranges is allowed")
}

// TestTriggerResourcesAreWatchable: every kind the Deployment lets triggers watch
// (--trigger-resources) the operator may list and watch cluster-wide, and no other kind of
// the trigger's kinds' list rules is granted.
func TestTriggerResourcesAreWatchable(t *testing.T) {
	objs := build(t)
	d := decode[appsv1.Deployment](t, objs, "Deployment/stepwise-operator")
	value := trigger.DefaultResources
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(arg, trigger.ResourcesFlag+"="); ok {
			value = v
		}
	}
	resources, err := trigger.ParseResources(value)
	require.NoError(t, err)
	require.NotEmpty(t, resources)
	cr := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/stepwise-operator")
	for _, gr := range resources {
		var verbs []string
		for _, r := range cr.Rules {
			if slices.Contains(r.APIGroups, gr.Group) && slices.Contains(r.Resources, gr.Resource) && len(r.ResourceNames) == 0 {
				verbs = append(verbs, r.Verbs...)
			}
		}
		assert.Subset(t, verbs, []string{"list", "watch"}, "the operator watches %s for triggers", gr)
	}
}
