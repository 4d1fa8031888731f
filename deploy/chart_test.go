package deploy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"math/big"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/alerts"
)

// The chart (charts/stepwise) and the kustomization (deploy/) install the same objects.
// deploy/base is the chart's rendering with namespaced.enabled and no tenant (hack/gen-deploy
// writes it, hack/verify-deploy.sh fails when it is stale); what the kustomizations add to it
// by hand (the default install's cluster-wide rights, a tenant's Role and quota, the image's
// tag) the tests below check: they render the chart and build the kustomization, and compare.

const chartDir = "../charts/stepwise"

// clusterScoped are the kinds of the install that have no namespace.
var clusterScoped = map[string]bool{
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
}

// helmLabels are the labels only the chart puts on its objects.
var helmLabels = []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart"}

// helm is the pinned Helm make installs (the Makefile exports HELM), or the one in ../bin.
func helm(t *testing.T) string {
	t.Helper()
	if path := os.Getenv("HELM"); path != "" {
		return path
	}
	require.FileExists(t, "../bin/helm", "no Helm: run make helm")
	return "../bin/helm"
}

// render runs helm template on the chart with args, and returns its objects by
// "Kind/namespace/name", without the labels only Helm adds.
func render(t *testing.T, args ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := renderErr(t, args...)
	require.NoError(t, err, out)
	return objectsOf(t, []byte(out), true)
}

func renderErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), append([]string{"template", "stepwise", chartDir, "--namespace", "stepwise-system"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), err
	}
	return string(out), nil
}

// kustomized returns the objects kustomize builds from dir, by "Kind/namespace/name".
func kustomized(t *testing.T, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err)
	data, err := resources.AsYaml()
	require.NoError(t, err)
	return objectsOf(t, data, false)
}

func objectsOf(t *testing.T, data []byte, fromHelm bool) map[string]*unstructured.Unstructured {
	t.Helper()
	objs := map[string]*unstructured.Unstructured{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := decoder.Decode(&m); err != nil {
			break
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if clusterScoped[u.GetKind()] {
			// kustomize's namespace: puts one on kinds it does not know; the API server
			// ignores it on a cluster-scoped object.
			unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
		}
		var drop []string
		switch {
		case fromHelm:
			drop = helmLabels
		case u.GetKind() == "CustomResourceDefinition":
			// Helm applies a chart's crds/ as they are: hack/verify-crd.sh checks them.
			drop = []string{"app.kubernetes.io/part-of"}
		}
		if labels := u.GetLabels(); len(drop) > 0 {
			for _, l := range drop {
				delete(labels, l)
			}
			u.SetLabels(labels)
			if len(labels) == 0 {
				unstructured.RemoveNestedField(u.Object, "metadata", "labels")
			}
		}
		key := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		require.NotContains(t, objs, key, "two objects %s", key)
		objs[key] = u
	}
	return objs
}

// TestTheChartInstallsWhatTheKustomizationDoes: with its default values the chart renders
// every object of deploy/ as kustomize builds it (but the Namespace, which helm install
// --create-namespace makes), and nothing else. deploy/base is the chart's by construction:
// what this adds is that deploy/kustomization.yaml's patches are the cluster-wide rights the
// chart grants unless namespaced.enabled, and that kustomize's namespace, labels and image
// make the chart's objects.
func TestTheChartInstallsWhatTheKustomizationDoes(t *testing.T) {
	want := kustomized(t, ".")
	delete(want, "Namespace//stepwise-system")
	got := render(t, "--include-crds")
	assert.ElementsMatch(t, keys(want), keys(got))
	for key, w := range want {
		if g, ok := got[key]; ok {
			assert.Equal(t, w.Object, g.Object, key)
		}
	}
}

// TestTheNamespacedChartInstallsWhatTheNamespacedKustomizationDoes: namespaced.enabled is
// deploy/namespaced/, and each tenant gets deploy/namespaced/tenant.yaml and, with the
// default values, deploy/tenant-quota.yaml in its namespace (both written by hand: the
// chart's base is hack/verify-deploy.sh's to check, these are this test's).
func TestTheNamespacedChartInstallsWhatTheNamespacedKustomizationDoes(t *testing.T) {
	want := kustomized(t, "namespaced")
	delete(want, "Namespace//stepwise-system")
	for _, file := range []string{"namespaced/tenant.yaml", "tenant-quota.yaml"} {
		tenant, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, ns := range []string{"team-a", "team-b"} {
			for key, obj := range objectsOf(t, tenant, false) {
				obj.SetNamespace(ns)
				want[strings.Replace(key, "//", "/"+ns+"/", 1)] = obj
			}
		}
	}
	got := render(t, "--include-crds", "--set", "namespaced.enabled=true",
		"--set", "namespaced.tenants[0].namespace=team-a", "--set", "namespaced.tenants[1].namespace=team-b")
	assert.ElementsMatch(t, keys(want), keys(got))
	for key, w := range want {
		if g, ok := got[key]; ok {
			assert.Equal(t, w.Object, g.Object, key)
		}
	}
}

// TestTheChartsValues: each value reaches the object it is for.
func TestTheChartsValues(t *testing.T) {
	deployment := func(t *testing.T, objs map[string]*unstructured.Unstructured) *appsv1.Deployment {
		t.Helper()
		return as[appsv1.Deployment](t, objs["Deployment/stepwise-system/stepwise-operator"])
	}
	tests := []struct {
		name  string
		set   []string
		check func(t *testing.T, objs map[string]*unstructured.Unstructured)
	}{
		{name: "image by tag", set: []string{"image.repository=registry.example/stepwise", "image.tag=v1.2.3"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				assert.Equal(t, "registry.example/stepwise:v1.2.3", deployment(t, objs).Spec.Template.Spec.Containers[0].Image)
			}},
		{name: "image by digest", set: []string{"image.repository=registry.example/stepwise", "image.tag=v1", "image.digest=sha256:" + strings.Repeat("a", 64)},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				assert.Equal(t, "registry.example/stepwise@sha256:"+strings.Repeat("a", 64), deployment(t, objs).Spec.Template.Spec.Containers[0].Image)
			}},
		{name: "replicas and resources", set: []string{"replicas=3", "resources.limits.memory=1Gi", "goMemLimit=768MiB"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				d := deployment(t, objs)
				assert.Equal(t, int32(3), *d.Spec.Replicas)
				assert.Equal(t, "1Gi", d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String())
				assert.Contains(t, d.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: "768MiB"})
			}},
		{name: "no soft memory limit", set: []string{"goMemLimit="},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				for _, e := range deployment(t, objs).Spec.Template.Spec.Containers[0].Env {
					assert.NotEqual(t, "GOMEMLIMIT", e.Name)
				}
			}},
		{name: "egress ranges", set: []string{"egress.pluginAllowedCIDRs={10.0.0.0/8,192.168.0.0/16}", "egress.gateAllowedCIDRs={10.96.0.0/12}",
			"egress.pluginAllowedCIDRsFor.vsphere={10.20.0.0/16}"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
				assert.Contains(t, args, "--plugin-allowed-cidrs=10.0.0.0/8,192.168.0.0/16")
				assert.Contains(t, args, "--gate-allowed-cidrs=10.96.0.0/12")
				assert.Contains(t, args, "--plugin-allowed-cidrs-for=vsphere=10.20.0.0/16")
			}},
		{name: "trigger resources are watched and granted alike", set: []string{"triggerResources[0].resource=nodes",
			"triggerResources[1].group=apps", "triggerResources[1].resource=deployments"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				assert.Contains(t, deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--trigger-resources=nodes,deployments.apps")
				role := as[rbacv1.ClusterRole](t, objs["ClusterRole//stepwise-operator"])
				assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}})
				assert.NotContains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"demo.stepwise.dev"}, Resources: []string{"webapps"}, Verbs: []string{"list", "watch"}})
			}},
		{name: "a ServiceMonitor", set: []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				sm := objs["ServiceMonitor/stepwise-system/stepwise-operator"]
				require.NotNil(t, sm)
				assert.Equal(t, "prom", sm.GetLabels()["release"])
				endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				require.Len(t, endpoints, 1)
				ep := endpoints[0].(map[string]any)
				assert.Equal(t, "https", ep["scheme"], "the token travels encrypted")
				assert.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", ep["bearerTokenFile"], "Prometheus says who it is")
				assert.Nil(t, objs["ClusterRoleBinding//stepwise-metrics-reader"], "no binding unless Prometheus' ServiceAccount is named")
			}},
		{name: "a ServiceMonitor whose Prometheus may read the metrics, of a certificate it checks",
			set: []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.prometheusServiceAccount.namespace=monitoring",
				"metrics.serviceMonitor.prometheusServiceAccount.name=prometheus-k8s", "metrics.tlsSecretName=stepwise-metrics-tls"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				binding := as[rbacv1.ClusterRoleBinding](t, objs["ClusterRoleBinding//stepwise-metrics-reader"])
				assert.Equal(t, "stepwise-metrics-reader", binding.RoleRef.Name)
				assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "monitoring", Name: "prometheus-k8s"}}, binding.Subjects)
				require.NotNil(t, objs["ClusterRole//stepwise-metrics-reader"])
				endpoints, _, _ := unstructured.NestedSlice(objs["ServiceMonitor/stepwise-system/stepwise-operator"].Object, "spec", "endpoints")
				tlsConfig := endpoints[0].(map[string]any)["tlsConfig"].(map[string]any)
				assert.Equal(t, "stepwise-operator-metrics.stepwise-system.svc", tlsConfig["serverName"])
				assert.NotContains(t, tlsConfig, "insecureSkipVerify")
				d := deployment(t, objs)
				assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--metrics-tls-cert-file=/etc/stepwise/metrics-tls/tls.crt")
				assert.Contains(t, d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "metrics-tls",
					VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "stepwise-metrics-tls"}}})
			}},
		{name: "a PrometheusRule of the rules pkg/alerts makes", set: []string{"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prom"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				rule := objs["PrometheusRule/stepwise-system/stepwise-operator"]
				require.NotNil(t, rule)
				assert.Equal(t, "prom", rule.GetLabels()["release"])
				data, err := json.Marshal(alerts.Rules(alerts.Default()))
				require.NoError(t, err)
				var want map[string]any
				require.NoError(t, json.Unmarshal(data, &want))
				assert.Equal(t, want, rule.Object["spec"], "the spec is the rule file")
			}},
		{name: "no mutating policy on an older cluster", set: []string{"admission.mutatingPolicy=false"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				assert.NotContains(t, objs, "MutatingAdmissionPolicy//stepwise-created-by")
				assert.NotContains(t, objs, "MutatingAdmissionPolicyBinding//stepwise-created-by")
				assert.Contains(t, objs, "ValidatingAdmissionPolicy//stepwise-created-by", "still refused when changed")
			}},
		{name: "a tenant's ServiceAccounts", set: []string{"namespaced.enabled=true", "namespaced.tenants[0].namespace=team-a",
			"namespaced.tenants[0].serviceAccounts={node-retirer}"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				role := as[rbacv1.Role](t, objs["Role/team-a/stepwise-operator"])
				assert.Equal(t, []string{"node-retirer"}, role.Rules[0].ResourceNames)
				assert.Equal(t, []string{"impersonate"}, role.Rules[0].Verbs)
				cluster := as[rbacv1.ClusterRole](t, objs["ClusterRole//stepwise-operator"])
				assert.False(t, slices.ContainsFunc(cluster.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, "impersonate") }),
					"namespaced: no impersonation cluster-wide")
			}},
		{name: "plugins from their own images, by init containers", set: []string{"pluginDelivery=initContainer", "plugins[0].name=example",
			"plugins[0].image=registry.example/stepwise-plugin-example@sha256:" + strings.Repeat("b", 64),
			"plugins[0].sha256=" + strings.Repeat("a", 64), "plugins[1].name=ticket", "plugins[1].image=registry.example/stepwise-plugin-ticket@sha256:" + strings.Repeat("d", 64),
			"plugins[1].sha256=" + strings.Repeat("c", 64)},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				cm := objs["ConfigMap/stepwise-system/stepwise-installed-plugins"]
				require.NotNil(t, cm)
				sums, _, _ := unstructured.NestedString(cm.Object, "data", "SHA256SUMS")
				assert.Equal(t, strings.Repeat("a", 64)+"  stepwise-plugin-example\n"+strings.Repeat("c", 64)+"  stepwise-plugin-ticket\n", sums,
					"the checksums are the installer's")
				pod := deployment(t, objs).Spec.Template.Spec
				require.Len(t, pod.InitContainers, 3)
				tool := pod.InitContainers[0]
				assert.Equal(t, pod.Containers[0].Image, tool.Image, "the copy tool comes from the operator's own image")
				assert.Equal(t, []string{"/usr/local/bin/stepwise-copy", "/copy-tool", "/usr/local/bin/stepwise-copy"}, tool.Command)
				init := pod.InitContainers[1]
				assert.Equal(t, "registry.example/stepwise-plugin-example@sha256:"+strings.Repeat("b", 64), init.Image)
				assert.Equal(t, []string{"/copy-tool/stepwise-copy", "/installed-plugins", "/stepwise-plugin-example"}, init.Command,
					"the plugin's image gives its binary; the operator's tool copies it (unsigned: no signature to copy)")
				assert.Equal(t, new(true), init.SecurityContext.ReadOnlyRootFilesystem)
				assert.Contains(t, init.VolumeMounts, corev1.VolumeMount{Name: "installed-plugins", MountPath: "/installed-plugins"})
				args := pod.Containers[0].Args
				assert.Contains(t, args, "--installed-plugin-dir=/installed-plugins")
				assert.Contains(t, args, "--installed-plugin-checksums=/etc/stepwise/installed-plugins/SHA256SUMS")
				assert.NotEmpty(t, deployment(t, objs).Spec.Template.Annotations["checksum/installed-plugins"], "a new list rolls the Pods")
				assertNoTokenWherePluginCodeRuns(t, pod)
			}},
		{name: "a signed plugin by init containers: its signature is copied too", set: []string{"pluginDelivery=initContainer", "plugins[0].name=example",
			"plugins[0].image=registry.example/stepwise-plugin-example@sha256:" + strings.Repeat("b", 64),
			"plugins[0].signature.publicKey=-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				pod := deployment(t, objs).Spec.Template.Spec
				require.Len(t, pod.InitContainers, 2)
				assert.Equal(t, []string{"/copy-tool/stepwise-copy", "/installed-plugins", "/stepwise-plugin-example", "/stepwise-plugin-example.sigstore.json"},
					pod.InitContainers[1].Command)
				assertNoTokenWherePluginCodeRuns(t, pod)
			}},
		{name: "plugins as image volumes, by default", set: []string{"plugins[0].name=example",
			"plugins[0].image=registry.example/stepwise-plugin-example@sha256:" + strings.Repeat("b", 64), "plugins[0].sha256=" + strings.Repeat("a", 64)},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				pod := deployment(t, objs).Spec.Template.Spec
				assert.Empty(t, pod.InitContainers, "nothing of a plugin's image runs")
				var image *corev1.ImageVolumeSource
				for _, v := range pod.Volumes {
					if v.Name == "plugin-example" {
						image = v.Image
					}
				}
				require.NotNil(t, image)
				assert.Equal(t, "registry.example/stepwise-plugin-example@sha256:"+strings.Repeat("b", 64), image.Reference)
				assert.Contains(t, pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "plugin-example", ReadOnly: true,
					MountPath: "/installed-plugins/example"}, "the image's binary and signature, in a directory of their own")
				assertNoTokenWherePluginCodeRuns(t, pod)
			}},
		{name: "signed plugins", set: []string{"plugins[0].name=example",
			"plugins[0].image=registry.example/stepwise-plugin-example@sha256:" + strings.Repeat("b", 64),
			"plugins[0].signature.publicKey=-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n",
			"plugins[1].name=vsphere", "plugins[1].image=registry.example/stepwise-plugin-vsphere@sha256:" + strings.Repeat("c", 64),
			"plugins[1].signature.identity=https://github.com/acme/plugins/.github/workflows/release.yml@refs/tags/v1",
			"plugins[1].signature.issuer=https://token.actions.githubusercontent.com", "pluginTrustedRoot=the trustedroot JSON"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				cm := objs["ConfigMap/stepwise-system/stepwise-installed-plugins"]
				require.NotNil(t, cm)
				policies, _, _ := unstructured.NestedString(cm.Object, "data", "policies.json")
				assert.JSONEq(t, `{"example":{"publicKey":"-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"},`+
					`"vsphere":{"identity":"https://github.com/acme/plugins/.github/workflows/release.yml@refs/tags/v1","issuer":"https://token.actions.githubusercontent.com"}}`, policies)
				root, _, _ := unstructured.NestedString(cm.Object, "data", "trusted_root.json")
				assert.Contains(t, root, "trustedroot")
				sums, _, _ := unstructured.NestedString(cm.Object, "data", "SHA256SUMS")
				assert.Empty(t, strings.TrimSpace(sums), "no checksum given, none listed")
				args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
				assert.Contains(t, args, "--installed-plugin-policies=/etc/stepwise/installed-plugins/policies.json")
				assert.Contains(t, args, "--plugin-trusted-root=/etc/stepwise/installed-plugins/trusted_root.json")
			}},
		{name: "an unpinned plugin image, accepted in so many words", set: []string{"plugins[0].name=example",
			"plugins[0].image=registry.example/stepwise-plugin-example:v1", "plugins[0].sha256=" + strings.Repeat("a", 64),
			"plugins[0].unpinnedImage=I accept that the tag may move to another build"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				assert.NotNil(t, objs["ConfigMap/stepwise-system/stepwise-installed-plugins"])
			}},
		{name: "no plugins, no installed source", check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			assertNoTokenWherePluginCodeRuns(t, deployment(t, objs).Spec.Template.Spec)
			assert.NotContains(t, objs, "ConfigMap/stepwise-system/stepwise-installed-plugins")
			assert.NotContains(t, strings.Join(deployment(t, objs).Spec.Template.Spec.Containers[0].Args, " "), "installed-plugin")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			tt.check(t, render(t, args...))
		})
	}
}

// TestTheChartsTenantQuota: each tenant namespace gets the ResourceQuota stepwise with
// namespaced.quota's counts, or those the tenant sets itself, and the extra entries of both.
func TestTheChartsTenantQuota(t *testing.T) {
	defaults := map[string]string{
		"count/pipelines.stepwise.dev":         "500",
		"count/pipelinetemplates.stepwise.dev": "50",
		"count/pipelinetriggers.stepwise.dev":  "50",
		"count/approvals.stepwise.dev":         "200",
	}
	with := func(changes map[string]string) map[string]string {
		out := maps.Clone(defaults)
		maps.Copy(out, changes)
		return out
	}
	tenants := []string{"--set", "namespaced.enabled=true", "--set", "namespaced.tenants[0].namespace=team-a",
		"--set", "namespaced.tenants[1].namespace=team-b"}
	tests := []struct {
		name string
		args []string
		// want is each namespace's spec.hard; a namespace it does not name has no quota.
		want map[string]map[string]string
	}{
		{name: "on by default", args: tenants,
			want: map[string]map[string]string{"team-a": defaults, "team-b": defaults}},
		{name: "counts for every tenant", args: append(slices.Clone(tenants), "--set", "namespaced.quota.pipelines=1000",
			"--set", "namespaced.quota.pipelineTemplates=20", "--set", "namespaced.quota.pipelineTriggers=5", "--set", "namespaced.quota.approvals=1500000"),
			want: map[string]map[string]string{
				"team-a": {"count/pipelines.stepwise.dev": "1000", "count/pipelinetemplates.stepwise.dev": "20",
					"count/pipelinetriggers.stepwise.dev": "5", "count/approvals.stepwise.dev": "1500000"},
				"team-b": {"count/pipelines.stepwise.dev": "1000", "count/pipelinetemplates.stepwise.dev": "20",
					"count/pipelinetriggers.stepwise.dev": "5", "count/approvals.stepwise.dev": "1500000"},
			}},
		{name: "a tenant's own counts, 0 included", args: append(slices.Clone(tenants), "--set", "namespaced.tenants[1].quota.pipelines=2000",
			"--set", "namespaced.tenants[1].quota.pipelineTriggers=0"),
			want: map[string]map[string]string{"team-a": defaults, "team-b": with(map[string]string{
				"count/pipelines.stepwise.dev": "2000", "count/pipelinetriggers.stepwise.dev": "0"})}},
		{name: "extra entries, merged by key", args: append(slices.Clone(tenants), "--set", "namespaced.quota.extra.count/secrets=100",
			"--set", `namespaced.quota.extra.count/rolebindings\.rbac\.authorization\.k8s\.io=50`,
			"--set", "namespaced.tenants[0].quota.extra.count/secrets=300", "--set-string", `namespaced.tenants[0].quota.extra.requests\.storage=10Gi`),
			want: map[string]map[string]string{
				"team-a": with(map[string]string{"count/secrets": "300", "count/rolebindings.rbac.authorization.k8s.io": "50", "requests.storage": "10Gi"}),
				"team-b": with(map[string]string{"count/secrets": "100", "count/rolebindings.rbac.authorization.k8s.io": "50"}),
			}},
		{name: "off for one tenant", args: append(slices.Clone(tenants), "--set", "namespaced.tenants[0].quota.enabled=false"),
			want: map[string]map[string]string{"team-b": defaults}},
		{name: "off for all but the one that turns it on", args: append(slices.Clone(tenants), "--set", "namespaced.quota.enabled=false",
			"--set", "namespaced.tenants[1].quota.enabled=true"),
			want: map[string]map[string]string{"team-b": defaults}},
		{name: "none without the namespaced install", args: []string{"--set", "namespaced.tenants[0].namespace=team-a"},
			want: map[string]map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]map[string]string{}
			for key, obj := range render(t, tt.args...) {
				if obj.GetKind() != "ResourceQuota" {
					continue
				}
				q := as[corev1.ResourceQuota](t, obj) // a valid ResourceQuota
				assert.Equal(t, "ResourceQuota/"+q.Namespace+"/stepwise", key)
				assert.Equal(t, "stepwise", q.Labels["app.kubernetes.io/part-of"])
				// As written: quantities as strings, 1000 not 1e+03.
				hard, ok, err := unstructured.NestedStringMap(obj.Object, "spec", "hard")
				require.NoError(t, err)
				require.True(t, ok)
				got[q.Namespace] = hard
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestTheChartsSchemaRefusesWrongValues: values.schema.json stops a typo or a wrong type
// before anything is applied.
func TestTheChartsSchemaRefusesWrongValues(t *testing.T) {
	for _, set := range []string{
		"replicas=two",
		"replica=2", // a typo of replicas
		"image.digest=latest",
		"namespaced.tenants[0].serviceAccounts={a}", // a tenant without its namespace
		"triggerResources[0].resource=secrets",
		"egress.pluginAllowedCIDRs={not-a-cidr}",
		"podDisruptionBudget.maxUnavailable=0",
		"plugins[0].name=example", // no image, no sha256 nor signature
		"pluginDelivery=copy",
		"goMemLimit=256Mi", // Go's unit is MiB, not Kubernetes' Mi
		"namespaced.quota.pipelines=-1",
		"namespaced.quota.approvals=many",
		"namespaced.quota.pipeline=5", // a typo of pipelines
		"namespaced.tenants[0].namespace=team-a,namespaced.tenants[0].quota.templates=5", // pipelineTemplates
		`namespaced.quota.extra.count/pipelines\.stepwise\.dev=5`,                        // pipelines sets it
		"namespaced.quota.extra.count/secrets=lots",
		"namespaced.quota.enabled=yes",
		"metrics.serviceMonitor.prometheusServiceAccount.name=prometheus", // without its namespace
		"metrics.tlsSecretName=Not_A_Name",
		"archive.enabled=yes",
		"archive.dsnSecret.name=Not_A_Name",
		"archive.history.port=0",
		"archive.history.port=8080",    // the metrics port
		"archive.history.tls.secret=x", // a typo of secretName
		"archive.postgresql.storage=1GB",
		"archive.postgresql.replicas=3", // one, for trying it
	} {
		t.Run(set, func(t *testing.T) {
			out, err := renderErr(t, "--set", set)
			require.Error(t, err, "helm template accepted %s", set)
			assert.Contains(t, out, "values don't meet the specifications of the schema")
		})
	}
}

// assertNoTokenWherePluginCodeRuns: the Pod mounts no ServiceAccount token of its own
// accord, only the operator's container mounts the projected one, and no init container
// runs a plugin image's own code.
func assertNoTokenWherePluginCodeRuns(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	assert.Equal(t, new(false), pod.AutomountServiceAccountToken, "no token in every container")
	for _, c := range pod.InitContainers {
		if c.Image != pod.Containers[0].Image {
			// A plugin's image: its files only, never its code.
			require.NotEmpty(t, c.Command, "init container %s runs its image's entrypoint", c.Name)
			assert.Equal(t, "/copy-tool/stepwise-copy", c.Command[0], "init container %s runs the operator's copy tool", c.Name)
		}
		for _, m := range c.VolumeMounts {
			assert.Contains(t, []string{"plugin-copy-tool", "installed-plugins"}, m.Name, "init container %s mounts the copy tool and the plugins' directory alone", c.Name)
		}
	}
	require.Len(t, pod.Containers, 1)
	assert.Contains(t, pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "kube-api-access", ReadOnly: true,
		MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}, "the operator's container has its token")
}

func TestTheChartRefusesPluginsItCannotVerify(t *testing.T) {
	image := "registry.example/stepwise-plugin-example@sha256:" + strings.Repeat("b", 64)
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{name: "a tag, not a digest", set: []string{"plugins[0].name=example", "plugins[0].image=registry.example/stepwise-plugin-example:v1",
			"plugins[0].sha256=" + strings.Repeat("a", 64)}, want: "is not pinned by digest"},
		{name: "neither a checksum nor a signature policy", set: []string{"plugins[0].name=example", "plugins[0].image=" + image},
			want: "values don't meet the specifications of the schema"},
		{name: "a key and an identity", set: []string{"plugins[0].name=example", "plugins[0].image=" + image,
			"plugins[0].signature.publicKey=-----BEGIN PUBLIC KEY-----", "plugins[0].signature.identity=a@example.com",
			"plugins[0].signature.issuer=https://accounts.example"}, want: "values don't meet the specifications of the schema"},
		{name: "an identity without its issuer", set: []string{"plugins[0].name=example", "plugins[0].image=" + image,
			"plugins[0].signature.identity=a@example.com"}, want: "values don't meet the specifications of the schema"},
		{name: "unpinned, accepted in other words", set: []string{"plugins[0].name=example", "plugins[0].image=registry.example/stepwise-plugin-example:v1",
			"plugins[0].sha256=" + strings.Repeat("a", 64), "plugins[0].unpinnedImage=yes"}, want: "values don't meet the specifications of the schema"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			out, err := renderErr(t, args...)
			require.Error(t, err, "helm template accepted %v", tt.set)
			assert.Contains(t, out, tt.want)
		})
	}
}

// historyHost is the name the API server's aggregation layer verifies the history API's
// certificate for: its Service's.
const historyHost = "stepwise-operator-history.stepwise-system.svc"

// archiveObjects are the objects only the archive adds.
var archiveObjects = []string{
	"Secret/stepwise-system/stepwise-operator-history-tls",
	"Service/stepwise-system/stepwise-operator-history",
	"APIService//v1alpha1.history.stepwise.dev",
	"ClusterRoleBinding//stepwise-operator-auth-delegator",
	"RoleBinding/kube-system/stepwise-operator-auth-reader",
	"ClusterRole//stepwise-history-view",
	"Secret/stepwise-system/stepwise-postgresql",
	"Secret/stepwise-system/stepwise-archive-dsn",
	"Service/stepwise-system/stepwise-postgresql",
	"StatefulSet/stepwise-system/stepwise-postgresql",
}

// TestTheChartsArchive: archive.enabled mounts the connection string and registers the
// history API (its Service, APIService, certificate and the rights an aggregated API server
// needs); the bundled PostgreSQL is its own database; wrong combinations do not render.
// Each values set that renders also passes helm lint --strict.
func TestTheChartsArchive(t *testing.T) {
	operator := func(t *testing.T, objs map[string]*unstructured.Unstructured) (*corev1.PodSpec, *corev1.Container) {
		t.Helper()
		pod := as[appsv1.Deployment](t, objs["Deployment/stepwise-system/stepwise-operator"]).Spec.Template.Spec
		require.Len(t, pod.Containers, 1)
		return &pod, &pod.Containers[0]
	}
	volume := func(pod *corev1.PodSpec, name string) *corev1.Volume {
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == name {
				return &pod.Volumes[i]
			}
		}
		return nil
	}
	caBundle := func(t *testing.T, objs map[string]*unstructured.Unstructured) (string, bool) {
		t.Helper()
		apiService := objs["APIService//v1alpha1.history.stepwise.dev"]
		require.NotNil(t, apiService)
		ca, ok, err := unstructured.NestedString(apiService.Object, "spec", "caBundle")
		require.NoError(t, err)
		return ca, ok
	}
	noHistoryAPI := func(t *testing.T, objs map[string]*unstructured.Unstructured) {
		t.Helper()
		for _, key := range archiveObjects[:6] {
			assert.NotContains(t, objs, key)
		}
		_, c := operator(t, objs)
		assert.NotContains(t, strings.Join(c.Args, " "), "--history-")
		for _, p := range c.Ports {
			assert.NotEqual(t, "history", p.Name)
		}
	}
	dsnFile := func(t *testing.T, objs map[string]*unstructured.Unstructured, secret, key string) {
		t.Helper()
		pod, c := operator(t, objs)
		assert.Contains(t, c.Args, "--archive-dsn-file=/etc/stepwise/archive/dsn")
		assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "archive-dsn", MountPath: "/etc/stepwise/archive", ReadOnly: true})
		assert.Equal(t, &corev1.Volume{Name: "archive-dsn", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret, Items: []corev1.KeyToPath{{Key: key, Path: "dsn"}}}}}, volume(pod, "archive-dsn"),
			"the connection string alone, read-only")
	}
	caPEM := testCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o600))
	dsnSecret := []string{"--set", "archive.enabled=true", "--set", "archive.dsnSecret.name=stepwise-archive"}

	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, objs map[string]*unstructured.Unstructured)
	}{
		{name: "off by default", check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			for _, key := range archiveObjects {
				assert.NotContains(t, objs, key)
			}
			for key := range objs {
				assert.NotContains(t, key, "kube-system", "nothing outside the release's namespace")
			}
			pod, c := operator(t, objs)
			assert.NotContains(t, strings.Join(c.Args, " "), "--archive-")
			assert.Nil(t, volume(pod, "archive-dsn"))
			noHistoryAPI(t, objs)
		}},
		{name: "a DSN Secret of the installer's, and the history API", args: append(slices.Clone(dsnSecret),
			"--set", "archive.dsnSecret.key=url"),
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				dsnFile(t, objs, "stepwise-archive", "url")
				for _, key := range archiveObjects[6:] {
					assert.NotContains(t, objs, key, "no bundled PostgreSQL")
				}
				pod, c := operator(t, objs)
				assert.Contains(t, c.Args, "--history-secure-port=8443")
				assert.Contains(t, c.Args, "--history-tls-cert-file=/etc/stepwise/history-tls/tls.crt")
				assert.Contains(t, c.Args, "--history-tls-key-file=/etc/stepwise/history-tls/tls.key")
				assert.Contains(t, c.Ports, corev1.ContainerPort{Name: "history", ContainerPort: 8443})
				assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "history-tls", MountPath: "/etc/stepwise/history-tls", ReadOnly: true})
				tlsVolume := volume(pod, "history-tls")
				require.NotNil(t, tlsVolume)
				require.NotNil(t, tlsVolume.Secret)
				assert.Equal(t, "stepwise-operator-history-tls", tlsVolume.Secret.SecretName)

				svc := as[corev1.Service](t, objs["Service/stepwise-system/stepwise-operator-history"])
				assert.Equal(t, map[string]string{"app.kubernetes.io/name": "stepwise-operator"}, svc.Spec.Selector, "every operator replica")
				require.Len(t, svc.Spec.Ports, 1)
				assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
				assert.Equal(t, "history", svc.Spec.Ports[0].TargetPort.String())

				apiService := objs["APIService//v1alpha1.history.stepwise.dev"]
				require.NotNil(t, apiService)
				assert.Equal(t, "apiregistration.k8s.io/v1", apiService.GetAPIVersion())
				spec, _, _ := unstructured.NestedMap(apiService.Object, "spec")
				assert.Equal(t, "history.stepwise.dev", spec["group"])
				assert.Equal(t, "v1alpha1", spec["version"])
				assert.EqualValues(t, 1000, spec["groupPriorityMinimum"])
				assert.EqualValues(t, 15, spec["versionPriority"])
				assert.Equal(t, map[string]any{"name": "stepwise-operator-history", "namespace": "stepwise-system", "port": float64(443)}, spec["service"])

				// The API server verifies the operator's certificate against caBundle, for
				// the Service's name: the chart's CA signed the chart's certificate.
				secret := as[corev1.Secret](t, objs["Secret/stepwise-system/stepwise-operator-history-tls"])
				assert.Equal(t, corev1.SecretTypeTLS, secret.Type)
				ca, ok := caBundle(t, objs)
				require.True(t, ok, "a caBundle")
				caDER, err := base64.StdEncoding.DecodeString(ca)
				require.NoError(t, err)
				assert.Equal(t, secret.Data["ca.crt"], caDER, "the Secret keeps the CA with the certificate")
				roots := x509.NewCertPool()
				require.True(t, roots.AppendCertsFromPEM(caDER), "caBundle is a PEM certificate")
				block, _ := pem.Decode(secret.Data["tls.crt"])
				require.NotNil(t, block, "tls.crt is PEM")
				cert, err := x509.ParseCertificate(block.Bytes)
				require.NoError(t, err)
				_, err = cert.Verify(x509.VerifyOptions{DNSName: historyHost, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
				require.NoError(t, err, "the caBundle verifies the serving certificate for %s", historyHost)
				_, err = cert.Verify(x509.VerifyOptions{DNSName: "stepwise-operator-history.elsewhere.svc", Roots: roots})
				require.Error(t, err, "for that name only")
				_, err = tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
				require.NoError(t, err, "tls.key is the certificate's key")

				delegator := as[rbacv1.ClusterRoleBinding](t, objs["ClusterRoleBinding//stepwise-operator-auth-delegator"])
				assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"}, delegator.RoleRef)
				assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "stepwise-operator", Namespace: "stepwise-system"}}, delegator.Subjects)
				reader := as[rbacv1.RoleBinding](t, objs["RoleBinding/kube-system/stepwise-operator-auth-reader"])
				assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "extension-apiserver-authentication-reader"}, reader.RoleRef)
				assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "stepwise-operator", Namespace: "stepwise-system"}}, reader.Subjects)

				view := as[rbacv1.ClusterRole](t, objs["ClusterRole//stepwise-history-view"])
				assert.Equal(t, "true", view.Labels["rbac.authorization.k8s.io/aggregate-to-view"], "whoever may view a namespace may read its history")
				assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"history.stepwise.dev"}, Resources: []string{"pipelinerecords"},
					Verbs: []string{"get", "list"}}}, view.Rules)
			}},
		{name: "another port, and history for those it is bound to", args: append(slices.Clone(dsnSecret),
			"--set", "archive.history.port=9443", "--set", "archive.history.aggregateToView=false"),
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				_, c := operator(t, objs)
				assert.Contains(t, c.Args, "--history-secure-port=9443")
				assert.Contains(t, c.Ports, corev1.ContainerPort{Name: "history", ContainerPort: 9443})
				view := as[rbacv1.ClusterRole](t, objs["ClusterRole//stepwise-history-view"])
				assert.NotContains(t, view.Labels, "rbac.authorization.k8s.io/aggregate-to-view")
			}},
		{name: "the archive without the history API", args: append(slices.Clone(dsnSecret), "--set", "archive.history.enabled=false"),
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				dsnFile(t, objs, "stepwise-archive", "dsn")
				noHistoryAPI(t, objs)
				pod, _ := operator(t, objs)
				assert.Nil(t, volume(pod, "history-tls"))
			}},
		{name: "a certificate of the installer's, and its CA in PEM", args: append(slices.Clone(dsnSecret),
			"--set", "archive.history.tls.secretName=history-cert", "--set-file", "archive.history.tls.caBundle="+caFile),
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				assert.NotContains(t, objs, "Secret/stepwise-system/stepwise-operator-history-tls", "no certificate of the chart's")
				pod, c := operator(t, objs)
				assert.Contains(t, c.Args, "--history-tls-cert-file=/etc/stepwise/history-tls/tls.crt")
				tlsVolume := volume(pod, "history-tls")
				require.NotNil(t, tlsVolume)
				require.NotNil(t, tlsVolume.Secret)
				assert.Equal(t, "history-cert", tlsVolume.Secret.SecretName)
				ca, ok := caBundle(t, objs)
				require.True(t, ok)
				assert.Equal(t, base64.StdEncoding.EncodeToString(caPEM), ca, "the CA as given, base64 as the field wants")
			}},
		{name: "a certificate of the installer's, and its CA in base64", args: append(slices.Clone(dsnSecret),
			"--set", "archive.history.tls.secretName=history-cert", "--set", "archive.history.tls.caBundle="+base64.StdEncoding.EncodeToString(caPEM)),
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				ca, _ := caBundle(t, objs)
				assert.Equal(t, base64.StdEncoding.EncodeToString(caPEM), ca)
			}},
		{name: "cert-manager's certificate, its CA injected", args: append(slices.Clone(dsnSecret),
			"--set", "archive.history.tls.secretName=history-cert",
			"--set", `archive.history.apiServiceAnnotations.cert-manager\.io/inject-ca-from=stepwise-system/stepwise-operator-history`),
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				_, ok := caBundle(t, objs)
				assert.False(t, ok, "cert-manager writes the caBundle")
				assert.Equal(t, "stepwise-system/stepwise-operator-history",
					objs["APIService//v1alpha1.history.stepwise.dev"].GetAnnotations()["cert-manager.io/inject-ca-from"])
				assert.NotContains(t, objs, "Secret/stepwise-system/stepwise-operator-history-tls")
			}},
		{name: "the bundled PostgreSQL, for trying it", args: []string{"--set", "archive.enabled=true", "--set", "archive.postgresql.deploy=true"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				dsnFile(t, objs, "stepwise-archive-dsn", "dsn")
				assert.Contains(t, objs, "APIService//v1alpha1.history.stepwise.dev")

				sts := as[appsv1.StatefulSet](t, objs["StatefulSet/stepwise-system/stepwise-postgresql"])
				assert.Equal(t, new(int32(1)), sts.Spec.Replicas)
				pod := sts.Spec.Template.Spec
				require.Len(t, pod.Containers, 1)
				c := pod.Containers[0]
				assert.Equal(t, "postgres:15", c.Image, "no registry host of the chart's")
				require.NotNil(t, pod.SecurityContext)
				assert.Equal(t, new(true), pod.SecurityContext.RunAsNonRoot)
				assert.NotEqual(t, new(int64(0)), pod.SecurityContext.RunAsUser)
				assert.Equal(t, new(false), pod.AutomountServiceAccountToken)
				require.NotNil(t, c.SecurityContext)
				assert.Equal(t, new(false), c.SecurityContext.AllowPrivilegeEscalation)
				assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
				assert.Equal(t, "256Mi", c.Resources.Requests.Memory().String())
				assert.Equal(t, "512Mi", c.Resources.Limits.Memory().String())
				assert.Contains(t, c.Env, corev1.EnvVar{Name: "POSTGRES_PASSWORD", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "stepwise-postgresql"}, Key: "password"}}})
				require.Len(t, sts.Spec.VolumeClaimTemplates, 1)
				assert.Equal(t, "1Gi", sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String())
				assert.Nil(t, sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName, "the cluster's default")

				svc := as[corev1.Service](t, objs["Service/stepwise-system/stepwise-postgresql"])
				assert.Equal(t, sts.Spec.Selector.MatchLabels, svc.Spec.Selector)
				assert.Equal(t, sts.Spec.Template.Labels, svc.Spec.Selector)
				require.Len(t, svc.Spec.Ports, 1)
				assert.Equal(t, int32(5432), svc.Spec.Ports[0].Port)

				password := as[corev1.Secret](t, objs["Secret/stepwise-system/stepwise-postgresql"])
				assert.Len(t, password.Data["password"], 32)
				assert.Equal(t, "keep", password.Annotations["helm.sh/resource-policy"], "the volume outlives helm uninstall, and so must its password")
				dsn := as[corev1.Secret](t, objs["Secret/stepwise-system/stepwise-archive-dsn"])
				u, err := url.Parse(string(dsn.Data["dsn"]))
				require.NoError(t, err)
				assert.Equal(t, "postgres", u.Scheme)
				assert.Equal(t, "stepwise-postgresql.stepwise-system.svc:5432", u.Host, "the bundled PostgreSQL's Service")
				assert.Equal(t, "stepwise", u.User.Username())
				pw, _ := u.User.Password()
				assert.Equal(t, string(password.Data["password"]), pw)
				assert.Equal(t, "/stepwise", u.Path)
				assert.Equal(t, "disable", u.Query().Get("sslmode"))
			}},
		{name: "the bundled PostgreSQL's image and volume", args: []string{"--set", "archive.enabled=true", "--set", "archive.postgresql.deploy=true",
			"--set", "archive.postgresql.image=mirror.example/postgres:15.8", "--set", "archive.postgresql.storage=5Gi",
			"--set", "archive.postgresql.storageClassName=fast"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				sts := as[appsv1.StatefulSet](t, objs["StatefulSet/stepwise-system/stepwise-postgresql"])
				assert.Equal(t, "mirror.example/postgres:15.8", sts.Spec.Template.Spec.Containers[0].Image)
				assert.Equal(t, "5Gi", sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String())
				assert.Equal(t, new("fast"), sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, render(t, tt.args...))
			lint := exec.Command(helm(t), append([]string{"lint", "--strict", chartDir, "--namespace", "stepwise-system"}, tt.args...)...)
			out, err := lint.CombinedOutput()
			require.NoError(t, err, "helm lint: %s", out)
		})
	}
}

// TestTheChartRefusesAnArchiveThatCannotWork: an archive with no database, or two; a
// bundled PostgreSQL for no archive; a certificate nothing verifies.
func TestTheChartRefusesAnArchiveThatCannotWork(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{name: "no database", set: []string{"archive.enabled=true"},
			want: "archive.enabled needs the PostgreSQL connection string: set archive.dsnSecret.name"},
		{name: "no database, and no history API", set: []string{"archive.enabled=true", "archive.history.enabled=false"},
			want: "archive.enabled needs the PostgreSQL connection string"},
		{name: "two databases", set: []string{"archive.enabled=true", "archive.dsnSecret.name=stepwise-archive", "archive.postgresql.deploy=true"},
			want: "name two databases"},
		{name: "a PostgreSQL for no archive", set: []string{"archive.postgresql.deploy=true"},
			want: "set archive.enabled=true with it"},
		{name: "a certificate without its CA", set: []string{"archive.enabled=true", "archive.dsnSecret.name=stepwise-archive",
			"archive.history.tls.secretName=history-cert"}, want: "needs the CA that signed its certificate"},
		{name: "a CA without its certificate", set: []string{"archive.enabled=true", "archive.dsnSecret.name=stepwise-archive",
			"archive.history.tls.caBundle=Zm9v"}, want: "name its Secret in archive.history.tls.secretName"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			out, err := renderErr(t, args...)
			require.Error(t, err, "helm template accepted %v", tt.set)
			assert.Contains(t, out, tt.want)
		})
	}
}

// testCA is a self-signed CA certificate, PEM.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	require.NotNil(t, u)
	data, err := yaml.Marshal(u.Object)
	require.NoError(t, err)
	var obj T
	require.NoError(t, yaml.UnmarshalStrict(data, &obj))
	return &obj
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
