package k8s

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// The inventory of a k8s.apply step is its "objects" output: what it applied and may have
// to delete, at a re-run (prune) or at teardown. It is the step's only memory of what it
// applied, so it must list every object the step made that may still exist, at every
// moment an output is recorded.

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

// sameObject tells whether a and b name the same object. The version is only the form it
// was read in: apps/v1beta1 and apps/v1 Deployment shop/web are one object, which a re-run
// that moves the manifest to the newer version must not prune.
func sameObject(a, b ObjectRef) bool {
	return a.Group == b.Group && a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name
}

// indexOf is the index of the object r names in refs, or -1.
func indexOf(refs []ObjectRef, r ObjectRef) int {
	return slices.IndexFunc(refs, func(x ObjectRef) bool { return sameObject(x, r) })
}

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

// unrecorded tells whether some of refs are not in recorded exactly as they are: an object
// recorded under another version counts, so that the record learns the version it is
// applied in now.
func unrecorded(refs, recorded []ObjectRef) bool {
	for _, r := range refs {
		if !slices.Contains(recorded, r) {
			return true
		}
	}
	return false
}

// union is recorded with refs merged in: an object recorded already takes the version it
// has in refs, one that is not is added at the end.
func union(recorded, refs []ObjectRef) []ObjectRef {
	out := slices.Clone(recorded)
	for _, r := range refs {
		if i := indexOf(out, r); i >= 0 {
			out[i] = r
		} else {
			out = append(out, r)
		}
	}
	return out
}

// removedFrom is the objects of previous that current no longer has, in the order of
// previous.
func removedFrom(previous, current []ObjectRef) []ObjectRef {
	var out []ObjectRef
	for _, r := range previous {
		if indexOf(current, r) < 0 {
			out = append(out, r)
		}
	}
	return out
}

// checkInventorySize fails when an inventory the step may have to record does not fit the
// outputs of a step. Between applying refs and pruning what previous has and refs lacks,
// that is both together (see Apply), so that is what must fit: checked before anything is
// applied, not found out after.
func checkInventorySize(refs, previous []ObjectRef) error {
	inventory := union(previous, refs)
	size := len(ObjectsOutput) + len(FormatObjectRefs(inventory))
	if size <= contract.MaxOutputsSize {
		return nil
	}
	if old := len(inventory) - len(refs); old > 0 {
		return invalidParam("manifest", "its %d objects, with the %d %s of the previous run that it would prune, make an %q output of %d bytes, "+
			"more than the %d bytes a step may keep (until the old objects are pruned the step lists both); split the manifest over several steps",
			len(refs), old, plural(old, "object"), ObjectsOutput, size, contract.MaxOutputsSize)
	}
	return invalidParam("manifest", "its %d objects make an %q output of %d bytes, more than the %d bytes a step may keep; split the manifest over several steps",
		len(refs), ObjectsOutput, size, contract.MaxOutputsSize)
}
