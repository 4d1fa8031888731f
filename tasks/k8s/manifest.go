package k8s

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// plannedObject is an object of the manifest, ready to apply.
type plannedObject struct {
	obj     *unstructured.Unstructured
	mapping *meta.RESTMapping
	ref     ObjectRef
	// unserved is why there is no mapping: the API server serves no such kind (now). Only
	// a plan keeps such an object (see plan).
	unserved error
}

// parseManifest decodes the documents of the manifest parameter, skipping empty ones, and
// checks that each is an object with apiVersion, kind and metadata.name.
func parseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	// The engine made sure the parameter is set; a blank one (a reference to an empty
	// output) holds nothing to apply either.
	if strings.TrimSpace(manifest) == "" {
		return nil, invalidParam("manifest", "is empty: give one or more YAML documents of Kubernetes objects")
	}
	decoder := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := decoder.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalidParam("manifest", "document %d is not valid YAML or JSON: %v", doc, err)
		}
		if trimmed := strings.TrimSpace(string(raw)); trimmed == "" || trimmed == "null" {
			continue // an empty document, e.g. after a trailing "---"
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name         string `json:"name"`
				GenerateName string `json:"generateName"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, invalidParam("manifest", "document %d is not a Kubernetes object: %v", doc, err)
		}
		var missing []string
		if head.APIVersion == "" {
			missing = append(missing, "apiVersion")
		}
		if head.Kind == "" {
			missing = append(missing, "kind")
		}
		if head.Metadata.Name == "" {
			missing = append(missing, "metadata.name")
		}
		if len(missing) > 0 {
			hint := ""
			if head.Metadata.GenerateName != "" {
				hint = " (metadata.generateName is not supported: a repeated apply must find the same object)"
			}
			return nil, invalidParam("manifest", "document %d has no %s%s", doc, strings.Join(missing, ", "), hint)
		}
		if _, err := schema.ParseGroupVersion(head.APIVersion); err != nil {
			return nil, invalidParam("manifest", "document %d: %v", doc, err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, invalidParam("manifest", "document %d (%s %s): %v", doc, head.Kind, head.Metadata.Name, err)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, invalidParam("manifest", "holds no object, only empty documents")
	}
	return objs, nil
}

// plan maps each object to its resource, puts it in its namespace and gives it the owner
// labels of me. It applies nothing. A kind the API server does not serve fails, unless
// keepUnserved (a plan: an earlier step may install its CRD before Create runs); such an
// object is then kept without a mapping, in the namespace it names or else the pipeline's,
// as most custom resources are namespaced.
func plan(req *executor.Request, m *mapper, me owner, objs []*unstructured.Unstructured, keepUnserved bool) ([]plannedObject, error) {
	planned := make([]plannedObject, 0, len(objs))
	seen := make(map[ObjectRef]int, len(objs))
	for i, obj := range objs {
		gvk := obj.GroupVersionKind()
		var unserved error
		mapping, err := m.mapping(gvk)
		if meta.IsNoMatchError(err) {
			unserved = invalidParam("manifest", "object %d (%s %s): the API server serves no kind %q in %q",
				i+1, gvk.Kind, obj.GetName(), gvk.Kind, gvk.GroupVersion().String())
			if !keepUnserved {
				return nil, unserved
			}
		} else if err != nil {
			return nil, fmt.Errorf("look up kind %s of %s: %w", gvk.Kind, obj.GetName(), err)
		}
		switch {
		case mapping == nil || mapping.Scope.Name() == meta.RESTScopeNameNamespace:
			if obj.GetNamespace() == "" {
				obj.SetNamespace(req.Pipeline.Namespace)
			}
		default:
			obj.SetNamespace("")
		}
		me.label(obj)

		ref := ObjectRef{GroupVersionKind: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if j, dup := seen[ref]; dup {
			return nil, invalidParam("manifest", "object %d (%s) is also object %d: each object may appear once", i+1, ref.describe(), j+1)
		}
		seen[ref] = i
		planned = append(planned, plannedObject{obj: obj, mapping: mapping, ref: ref, unserved: unserved})
	}
	return planned, nil
}

// refsOf lists what planned will apply, in order.
func refsOf(planned []plannedObject) []ObjectRef {
	refs := make([]ObjectRef, len(planned))
	for i, p := range planned {
		refs[i] = p.ref
	}
	return refs
}
