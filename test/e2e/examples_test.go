package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// TestExamplesAreAccepted keeps examples/ from going stale: every file there (whatever
// files there are) is applied with a server-side dry run, so the API server and the CRD's
// schema and rules admit each object, and each Pipeline names only executors the operator
// offers (built in, or served by a plugin in bin/plugins). hello.yaml and
// retire-kwok-node.yaml also run for real in `make demo`, webapp.yaml in webapp_test.go.
func TestExamplesAreAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)

	offered := offeredExecutors(t)
	byFile := map[string][]*unstructured.Unstructured{}
	for _, file := range files {
		byFile[file] = decodeFile(t, file)
		require.NotEmpty(t, byFile[file], file)
		// A dry run creates nothing, so the objects in a Namespace the file creates would
		// find none: make the namespaces for real, bare, for every file at once (several
		// files share one).
		for _, ns := range namespacesOf(byFile[file]) {
			ensureNamespace(t, ns)
		}
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := byFile[file]

			out, err := kubectl(t, "apply", "--dry-run=server", "-f", file)
			require.NoError(t, err, out)
			for _, obj := range objs {
				assert.Regexp(t, `(?m)^\S+/`+strings.ReplaceAll(obj.GetName(), ".", `\.`)+` (created|configured|unchanged) \(server dry run\)$`, out,
					"%s %s", obj.GetKind(), obj.GetName())
			}

			for _, obj := range objs {
				if obj.GetKind() != "Pipeline" && obj.GetKind() != "PipelineTemplate" {
					continue
				}
				steps, _, err := unstructured.NestedSlice(obj.Object, "spec", "steps")
				require.NoError(t, err)
				for _, s := range steps {
					executor, _, _ := unstructured.NestedString(s.(map[string]any), "executor")
					assert.Contains(t, offered, executor, "%s %s: is its plugin built into bin/plugins (make build)?", obj.GetKind(), obj.GetName())
				}
			}
		})
	}
}

// offeredExecutors reads the catalogue the shared operator published.
func offeredExecutors(t *testing.T) []string {
	t.Helper()
	var cat catalog.Catalog
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		cat, err = catalog.Read(ctx, cluster.Client, framework.OperatorNamespace, catalog.DefaultName)
		return err == nil, nil
	})
	require.NoError(t, err, "no executor catalogue; operator log %s", operator.Log)
	var names []string
	for _, e := range cat.Executors {
		names = append(names, e.Name)
	}
	return names
}

func decodeFile(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj unstructured.Unstructured
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err, file)
		if len(obj.Object) > 0 {
			objs = append(objs, &obj)
		}
	}
}

// namespacesOf lists the namespaces the objects live in or create.
func namespacesOf(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		ns := o.GetNamespace()
		if o.GetKind() == "Namespace" {
			ns = o.GetName()
		}
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// ensureNamespace creates the namespace unless it exists, and deletes it after the test
// only if it created it, waiting until it is gone so that a next run can make it again.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := cluster.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		namespaces := cluster.Client.CoreV1().Namespaces()
		if err := namespaces.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
			return
		}
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := namespaces.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("namespace %s is not gone: %v", name, err)
		}
	})
}
