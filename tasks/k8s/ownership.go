package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// ReasonNotOwned is the reason of a k8s.apply whose manifest names an object that exists
// and is not the step's own: applying would take it over, and its teardown delete it.
const ReasonNotOwned = "NotOwned"

// owner is who the owner labels of an object name (see PipelineLabel).
type owner struct{ pipeline, uid, step string }

// ownerOf reads the owner labels of obj.
func ownerOf(obj metav1.Object) owner {
	labels := obj.GetLabels()
	return owner{pipeline: labels[PipelineLabel], uid: labels[PipelineUIDLabel], step: labels[StepLabel]}
}

// stepOwner is the owner that the step of req writes on what it applies. Without the
// pipeline's UID it could not tell its objects from those of a same-named pipeline, so it
// refuses to apply anything.
func stepOwner(req *executor.Request) (owner, error) {
	if req.Pipeline.UID == "" {
		return owner{}, contract.Permanent("NoPipelineUID",
			errors.New("the request names no pipeline UID, which k8s.apply writes on what it applies to know it later as its own"))
	}
	return owner{pipeline: req.Pipeline.Name, uid: req.Pipeline.UID, step: req.Step}, nil
}

// label writes the owner labels of o on obj, keeping its other labels.
func (o owner) label(obj *unstructured.Unstructured) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = make(map[string]string, 3)
	}
	labels[PipelineLabel] = o.pipeline
	labels[PipelineUIDLabel] = o.uid
	labels[StepLabel] = o.step
	obj.SetLabels(labels)
}

// owns tells whether the step o owns an object whose labels name live. The pipeline's UID
// decides: a same-named pipeline (recreated, or in another namespace) is another owner.
// An object labelled with o's pipeline and step but no UID was applied by a Stepwise from
// before the UID label; it is o's only when o's inventory lists it (listed), for only then
// did this pipeline apply it.
func (o owner) owns(live owner, listed bool) bool {
	if live.pipeline != o.pipeline || live.step != o.step {
		return false
	}
	if live.uid == "" {
		return listed
	}
	return live.uid == o.uid
}

// String says what the owner labels hold, for messages.
func (o owner) String() string {
	if o.pipeline == "" {
		return "has no " + PipelineLabel + " label"
	}
	uid := "UID " + o.uid
	if o.uid == "" {
		uid = "no " + PipelineUIDLabel + " label"
	}
	return fmt.Sprintf("labelled for pipeline %q (%s), step %q", o.pipeline, uid, o.step)
}

// notOurs describes an object left alone because its labels name holder.
func notOurs(ref ObjectRef, holder owner) string {
	return fmt.Sprintf("%s (%s)", ref.describe(), holder)
}

// leftMessage says which objects the step left because they are not its own.
func leftMessage(left []string) string {
	verb := "are"
	if len(left) == 1 {
		verb = "is"
	}
	return fmt.Sprintf("left %d %s that %s not this step's: %s", len(left), plural(len(left), "object"), verb, strings.Join(left, ", "))
}

// claim reads every object of the manifest that exists, before anything is applied, and
// refuses to apply onto one that is not the step's own (me, listed or not in the previous
// inventory) unless force: else the step would take it over, and its teardown delete what
// someone else made. Reading all first fails the step before it writes anything. It
// returns the objects that force takes over.
func claim(ctx context.Context, client dynamic.Interface, me owner, planned []plannedObject, previous []ObjectRef, force bool) ([]string, error) {
	var takeovers []string
	for _, p := range planned {
		live, err := resourceFor(client, p.mapping, p.ref.Namespace).Get(ctx, p.ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s before applying it: %w", p.ref.describe(), err)
		}
		holder, ok := me.mine(live, p.ref, previous)
		if ok {
			continue
		}
		if !force {
			return nil, errNotOwned(p.ref, holder)
		}
		takeovers = append(takeovers, p.ref.describe())
	}
	return takeovers, nil
}

// mine tells whether live, the object ref names as it exists, is the step me's own to
// apply onto, its inventory (previous) listing it or not; else it returns who its labels
// name.
func (o owner) mine(live metav1.Object, ref ObjectRef, previous []ObjectRef) (owner, bool) {
	holder := ownerOf(live)
	return holder, o.owns(holder, indexOf(previous, ref) >= 0)
}

// errNotOwned is the error of a Create whose manifest names ref, which exists and is not
// the step's own: holder's, as its labels say.
func errNotOwned(ref ObjectRef, holder owner) error {
	return contract.Permanent(ReasonNotOwned, fmt.Errorf(
		"%s exists and is not this step's (%s): set force: \"true\" on the step to take it over, "+
			"and its teardown will then delete it; or leave it out of the manifest",
		ref.describe(), holder))
}
