package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Ownership is what a pipeline is to a trigger.
type Ownership int

const (
	// NotOwned: another trigger's pipeline, an earlier trigger's of the same name, a copy,
	// or a pipeline no trigger made. The trigger neither counts, changes nor deletes it.
	NotOwned Ownership = iota
	// Owned: the trigger made it (it carries the trigger's UID).
	Owned
	// Adoptable: a version before LabelTriggerUID made it for this trigger; the trigger
	// stamps its UID on it and owns it from then on.
	Adoptable
)

// OwnershipOf tells what p is to trig. A pipeline is the trigger's only when it is in the
// trigger's namespace, carries its LabelTrigger and has the name the trigger gives the
// pipeline of the object it names (pipelineName): a copy, such as one made by an older
// kubectl stepwise rerun, has another name. Then:
//   - With LabelTriggerUID, it is the trigger's when that is the trigger's UID.
//   - Without (made before the label existed), it is adoptable when it was created at or
//     after the trigger's creationTimestamp: a trigger of the same name deleted and
//     created again is created after every pipeline of the earlier one (which made them
//     while it existed), so it adopts none of them. Timestamps have a second's precision:
//     a trigger created again within the second its predecessor made a pipeline would
//     adopt that one, which we accept for an upgrade that happens once.
func OwnershipOf(trig *v1alpha1.PipelineTrigger, p *v1alpha1.Pipeline) Ownership {
	label, ok := p.Labels[LabelTrigger]
	if trig.UID == "" || p.Namespace != trig.Namespace || !ok || label != LabelValueOf(trig.Name) ||
		p.Name != pipelineName(trig.Name, objectNameOf(p), types.UID(p.Labels[LabelObjectUID])) {
		return NotOwned
	}
	uid, stamped := p.Labels[LabelTriggerUID]
	switch {
	case stamped && uid == string(trig.UID):
		return Owned
	case !stamped && !p.CreationTimestamp.Before(&trig.CreationTimestamp):
		return Adoptable
	}
	return NotOwned
}

// objectNameOf is the name of the object a pipeline's AnnotationObject names
// (namespace/name, or name).
func objectNameOf(p *v1alpha1.Pipeline) string {
	object := p.Annotations[AnnotationObject]
	return object[strings.LastIndex(object, "/")+1:]
}

// adopt stamps the trigger's UID on a pipeline an earlier version made for it, on
// condition that it is still the pipeline we saw, and returns it as the API server has it
// then; nil when it is gone, or another pipeline has its name (the patch's test fails:
// Invalid), which the cache shows us at a later sync.
func (ts *triggerSync) adopt(ctx context.Context, p *v1alpha1.Pipeline) (*v1alpha1.Pipeline, error) {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": p.UID},
		{"op": "add", "path": "/metadata/labels/" + jsonPointerEscape(LabelTriggerUID), "value": string(ts.trig.UID)},
	})
	if err != nil {
		return nil, fmt.Errorf("marshal the adoption patch of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	adopted, err := ts.c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stamp trigger %s's UID on pipeline %s/%s: %w", ts.key, p.Namespace, p.Name, err)
	}
	ts.c.pipelines.Mutation(adopted)
	klog.FromContext(ctx).V(2).Info("Adopted a pipeline made before pipelines carried their trigger's UID",
		"trigger", ts.key, "pipeline", klog.KObj(adopted))
	return adopted, nil
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
