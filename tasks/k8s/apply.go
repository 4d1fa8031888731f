package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Apply is k8s.apply.
//
// Parameter manifest holds one or more YAML (or JSON) documents, each a whole object with
// apiVersion, kind and metadata.name; empty documents are skipped. Namespaced objects
// without a namespace go to the pipeline's namespace; cluster-scoped objects stay
// cluster-scoped.
//
// Create server-side applies every object, in order, as field manager "stepwise" with
// force, after adding the labels stepwise.dev/pipeline=PIPELINE and stepwise.dev/step=STEP.
// It reports the output "objects": the applied objects, comma-separated, each as
// GROUP/VERSION/KIND/NAMESPACE/NAME, where the group is empty for the core group and the
// namespace empty for cluster-scoped objects:
//
//	apps/v1/Deployment/shop/web,/v1/Service/shop/web,rbac.authorization.k8s.io/v1/ClusterRole//viewer
//
// The list must fit the 4 KiB a step keeps in its outputs; a manifest with more objects
// than that fails at once (split it over several steps). When applying an object fails,
// the objects applied before it are recorded first, so that the teardown deletes them.
//
// Delete deletes exactly the objects of its own "objects" output, last applied first,
// with foreground propagation (dependents, such as a Deployment's Pods, go first), and
// waits until every one is gone. A step whose Create never applied anything has nothing
// to delete.
type Apply struct{ executor.Base }

func (Apply) Name() string { return "k8s.apply" }

// ObjectsOutput is the output of k8s.apply that lists what it applied.
const ObjectsOutput = "objects"

// deletePoll is how often the teardown looks again at objects that are not gone yet.
const deletePoll = time.Second

// recordPoll is how soon Create runs again after it recorded a partial apply.
const recordPoll = 100 * time.Millisecond

// ObjectRef identifies one applied object.
type ObjectRef struct {
	schema.GroupVersionKind
	Namespace string
	Name      string
}

// String is GROUP/VERSION/KIND/NAMESPACE/NAME.
func (r ObjectRef) String() string {
	return strings.Join([]string{r.Group, r.Version, r.Kind, r.Namespace, r.Name}, "/")
}

func (r ObjectRef) describe() string { return kindName(r.Kind, r.Namespace, r.Name) }

// ParseObjectRef parses what ObjectRef.String returns.
func ParseObjectRef(s string) (ObjectRef, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 || parts[1] == "" || parts[2] == "" || parts[4] == "" {
		return ObjectRef{}, fmt.Errorf("%q is not GROUP/VERSION/KIND/NAMESPACE/NAME", s)
	}
	return ObjectRef{
		GroupVersionKind: schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]},
		Namespace:        parts[3],
		Name:             parts[4],
	}, nil
}

// FormatObjectRefs is the value of the "objects" output.
func FormatObjectRefs(refs []ObjectRef) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// ParseObjectRefs parses the value of the "objects" output.
func ParseObjectRefs(s string) ([]ObjectRef, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var refs []ObjectRef
	for _, part := range strings.Split(s, ",") {
		r, err := ParseObjectRef(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, nil
}

// plannedObject is an object of the manifest, ready to apply.
type plannedObject struct {
	obj     *unstructured.Unstructured
	mapping *meta.RESTMapping
	ref     ObjectRef
}

// parseManifest decodes the documents of the manifest parameter, skipping empty ones, and
// checks that each is an object with apiVersion, kind and metadata.name.
func parseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	if strings.TrimSpace(manifest) == "" {
		return nil, invalidParam("manifest", "is required: one or more YAML documents of Kubernetes objects")
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

// plan maps each object to its resource, puts it in its namespace, labels it and checks
// that the list of what will be applied fits in the step's outputs. It applies nothing.
func plan(req *executor.Request, m *mapper, objs []*unstructured.Unstructured) ([]plannedObject, error) {
	planned := make([]plannedObject, 0, len(objs))
	seen := make(map[ObjectRef]int, len(objs))
	for i, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := m.mapping(gvk)
		if meta.IsNoMatchError(err) {
			return nil, invalidParam("manifest", "object %d (%s %s): the API server serves no kind %q in %q",
				i+1, gvk.Kind, obj.GetName(), gvk.Kind, gvk.GroupVersion().String())
		}
		if err != nil {
			return nil, fmt.Errorf("look up kind %s of %s: %w", gvk.Kind, obj.GetName(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(req.Pipeline.Namespace)
			}
		} else {
			obj.SetNamespace("")
		}
		labels := obj.GetLabels()
		if labels == nil {
			labels = make(map[string]string, 2)
		}
		labels[PipelineLabel] = req.Pipeline.Name
		labels[StepLabel] = req.Step
		obj.SetLabels(labels)

		ref := ObjectRef{GroupVersionKind: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if j, dup := seen[ref]; dup {
			return nil, invalidParam("manifest", "object %d (%s) is also object %d: each object may appear once", i+1, ref.describe(), j+1)
		}
		seen[ref] = i
		planned = append(planned, plannedObject{obj: obj, mapping: mapping, ref: ref})
	}

	refs := make([]ObjectRef, len(planned))
	for i, p := range planned {
		refs[i] = p.ref
	}
	if size := len(ObjectsOutput) + len(FormatObjectRefs(refs)); size > v1alpha1.MaxStepOutputsSize {
		return nil, invalidParam("manifest", "its %d objects make an %q output of %d bytes, more than the %d bytes a step may keep; split the manifest over several steps",
			len(planned), ObjectsOutput, size, v1alpha1.MaxStepOutputsSize)
	}
	return planned, nil
}

func (Apply) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, restMapper, err := clients(req)
	if err != nil {
		return contract.Result{}, err
	}
	objs, err := parseManifest(req.Params["manifest"])
	if err != nil {
		return contract.Result{}, err
	}
	planned, err := plan(req, &mapper{m: restMapper}, objs)
	if err != nil {
		return contract.Result{}, err
	}
	// What an earlier call of this hook recorded; a malformed value is ours, and is replaced.
	recorded, _ := ParseObjectRefs(req.Outputs[req.Step][ObjectsOutput])

	refs := make([]ObjectRef, 0, len(planned))
	for i, p := range planned {
		_, err := resourceFor(client, p.mapping, p.ref.Namespace).Apply(ctx, p.ref.Name, p.obj,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			err = applyError(p.ref, err)
			if unrecorded(refs, recorded) {
				// Record what was applied before failing, so the teardown deletes it; the
				// next call applies those again (a no-op) and reports the failure.
				return contract.Result{
					RequeueAfter: recordPoll,
					Outputs:      map[string]string{ObjectsOutput: FormatObjectRefs(union(recorded, refs))},
					Message:      contract.Truncate(fmt.Sprintf("applied %d of %d objects, then: %v", i, len(planned), err), 512),
				}, nil
			}
			return contract.Result{}, err
		}
		refs = append(refs, p.ref)
	}
	return contract.DoneWithOutputs(fmt.Sprintf("applied %d %s", len(refs), plural(len(refs), "object")),
		map[string]string{ObjectsOutput: FormatObjectRefs(union(recorded, refs))}), nil
}

// applyError wraps the failure to apply ref. Objects the API server refuses as invalid
// stay invalid whatever the retries, so those errors are permanent.
func applyError(ref ObjectRef, err error) error {
	err = fmt.Errorf("apply %s: %w", ref.describe(), err)
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return contract.Permanent(string(apierrors.ReasonForError(err)), err)
	}
	return err
}

// unrecorded tells whether some of refs are not in recorded.
func unrecorded(refs, recorded []ObjectRef) bool {
	for _, r := range refs {
		if !slices.Contains(recorded, r) {
			return true
		}
	}
	return false
}

// union is recorded followed by the refs it lacks.
func union(recorded, refs []ObjectRef) []ObjectRef {
	out := slices.Clone(recorded)
	for _, r := range refs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func (Apply) Delete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	raw := req.Outputs[req.Step][ObjectsOutput]
	refs, err := ParseObjectRefs(raw)
	if err != nil {
		return contract.Result{}, contract.Permanent("InvalidOutput", fmt.Errorf("output %q of step %s: %w", ObjectsOutput, req.Step, err))
	}
	if len(refs) == 0 {
		return contract.Done("nothing was applied"), nil
	}
	client, restMapper, err := clients(req)
	if err != nil {
		return contract.Result{}, err
	}
	m := &mapper{m: restMapper}
	propagation := metav1.DeletePropagationForeground
	var pending []string
	for i := len(refs) - 1; i >= 0; i-- {
		ref := refs[i]
		mapping, err := m.mapping(ref.GroupVersionKind)
		if meta.IsNoMatchError(err) {
			continue // The kind is no longer served (its CRD went), and its objects with it.
		}
		if err != nil {
			return contract.Result{}, fmt.Errorf("delete %s: look up its kind: %w", ref.describe(), err)
		}
		resource := resourceFor(client, mapping, ref.Namespace)
		obj, err := resource.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return contract.Result{}, fmt.Errorf("delete %s: get: %w", ref.describe(), err)
		}
		if obj.GetDeletionTimestamp() == nil {
			uid := obj.GetUID()
			err := resource.Delete(ctx, ref.Name, metav1.DeleteOptions{
				PropagationPolicy: &propagation,
				// Delete the object just read, not one created under its name since.
				Preconditions: &metav1.Preconditions{UID: &uid},
			})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil && !apierrors.IsConflict(err) { // a conflict: replaced, look again
				return contract.Result{}, fmt.Errorf("delete %s: %w", ref.describe(), err)
			}
		}
		pending = append(pending, ref.describe())
	}
	if len(pending) == 0 {
		return contract.Done(fmt.Sprintf("deleted %d %s", len(refs), plural(len(refs), "object"))), nil
	}
	return contract.Wait(deletePoll, contract.Truncate(fmt.Sprintf("waiting for %d %s to be gone: %s",
		len(pending), plural(len(pending), "object"), strings.Join(pending, ", ")), 512)), nil
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

var _ executor.TaskExecutor = Apply{}
