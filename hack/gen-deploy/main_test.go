package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rendered is what helm template writes: each object after its template's # Source:.
const rendered = `---
# Source: stepwise/templates/pdb.yaml
# A node drain never takes both replicas at once.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  labels:
    app.kubernetes.io/part-of: stepwise
    app.kubernetes.io/managed-by: Helm
    app.kubernetes.io/instance: stepwise
    helm.sh/chart: stepwise-0.1.0
  name: stepwise-operator
  annotations:
    helm.sh/resource-policy: keep
spec:
  maxUnavailable: 1

---
# Source: stepwise/templates/rbac.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: stepwise-operator
  labels:
    app.kubernetes.io/managed-by: Helm
    helm.sh/chart: stepwise-0.1.0
---
# Source: stepwise/templates/servicemonitor.yaml
# Nothing: the template renders no object.
---
# Source: stepwise/templates/rbac.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: stepwise-operator
rules:
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
`

func TestFilesKeepTheChartsTextButHelmsLabels(t *testing.T) {
	objs, err := split([]byte(rendered))
	require.NoError(t, err)
	files, err := group(objs)
	require.NoError(t, err)
	require.Len(t, files, 2)
	assert.Equal(t, "pdb.yaml", files[0].name)
	assert.Equal(t, header+`# A node drain never takes both replicas at once.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  labels:
    app.kubernetes.io/part-of: stepwise
  name: stepwise-operator
spec:
  maxUnavailable: 1
`, string(files[0].data))
	assert.Equal(t, "rbac.yaml", files[1].name)
	assert.Equal(t, header+`apiVersion: v1
kind: ServiceAccount
metadata:
  name: stepwise-operator
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: stepwise-operator
rules:
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
`, string(files[1].data), "the objects of a template in Helm's order")
}

func TestRefusesWhatItCannotStrip(t *testing.T) {
	for name, doc := range map[string]string{
		"labels on one line": `# Source: stepwise/templates/pdb.yaml
apiVersion: v1
kind: ServiceAccount
metadata: {name: a, labels: {helm.sh/chart: stepwise-0.1.0, app.kubernetes.io/part-of: stepwise}}
`,
		"no source": `apiVersion: v1
kind: ServiceAccount
metadata:
  name: a
`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := split([]byte("---\n" + doc))
			assert.Error(t, err)
		})
	}
	for _, template := range []string{"stepwise/templates/crd.yaml", "stepwise/templates/namespace.yaml",
		"stepwise/templates/kustomization.yaml", "stepwise/charts/sub/templates/x.yaml", "stepwise/templates/sub/x.yaml",
		"stepwise/templates/NOTES.txt"} {
		_, err := fileOf(template)
		assert.Error(t, err, template)
	}
}

func TestRemovesTheFilesOfTemplatesThatWent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	write("old.yaml", header+"kind: ConfigMap\n")
	write("namespace.yaml", "kind: Namespace\n")
	write("rbac.yaml", header+"kind: ServiceAccount\n")
	require.NoError(t, removeStale(dir, []file{{name: "rbac.yaml"}}))
	assert.NoFileExists(t, filepath.Join(dir, "old.yaml"))
	assert.FileExists(t, filepath.Join(dir, "namespace.yaml"), "not gen-deploy's")
	assert.FileExists(t, filepath.Join(dir, "rbac.yaml"))
}

func TestKustomizationListsEveryFile(t *testing.T) {
	got := string(kustomization("stepwise-system", []file{{name: "pdb.yaml"}, {name: "rbac.yaml"}}))
	assert.Contains(t, got, "namespace: stepwise-system\n")
	assert.Contains(t, got, "resources:\n")
	assert.Contains(t, got, "- namespace.yaml\n")
	assert.Contains(t, got, "- crd.yaml\n")
	assert.Contains(t, got, "- pdb.yaml\n- rbac.yaml\n")
}
