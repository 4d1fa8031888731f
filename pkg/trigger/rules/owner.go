package rules

import (
	"strings"

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
// pipeline of the object it names (PipelineName): a copy, such as one made by an older
// kubectl stepwise rerun, has another name. Then:
//   - With LabelTriggerUID, it is the trigger's when that is the trigger's UID.
//   - Without (made before the label existed), it is adoptable when the API server
//     recorded operator (the user the operator acts as) as its creator and no one else as
//     having changed it since (AnnotationCreatedBy, AnnotationEditedBy, which the
//     install's admission policies stamp and guard): labels and names anyone who may
//     create a pipeline can write, so they never make it the trigger's. An empty
//     operator adopts nothing. And it must have been created at or after the trigger's
//     creationTimestamp: a trigger of the same name deleted and
//     created again is created after every pipeline of the earlier one (which made them
//     while it existed), so it adopts none of them. Timestamps have a second's precision:
//     a trigger created again within the second its predecessor made a pipeline would
//     adopt that one, which we accept for an upgrade that happens once.
func OwnershipOf(trig *v1alpha1.PipelineTrigger, p *v1alpha1.Pipeline, operator string) Ownership {
	label, ok := p.Labels[v1alpha1.LabelTrigger]
	if trig.UID == "" || p.Namespace != trig.Namespace || !ok || label != LabelValueOf(trig.Name) ||
		p.Name != PipelineName(trig.Name, objectNameOf(p), ObjectUIDOf(p)) {
		return NotOwned
	}
	uid, stamped := p.Labels[v1alpha1.LabelTriggerUID]
	switch {
	case stamped && uid == string(trig.UID):
		return Owned
	case !stamped && operator != "" && p.Annotations[v1alpha1.AnnotationCreatedBy] == operator &&
		onlyEditedBy(p, operator) && !p.CreationTimestamp.Before(&trig.CreationTimestamp):
		return Adoptable
	}
	return NotOwned
}

// onlyEditedBy says whether no one but operator changed p since its creation, as the
// API server recorded (AnnotationEditedBy: one user a line).
func onlyEditedBy(p *v1alpha1.Pipeline, operator string) bool {
	for editor := range strings.Lines(p.Annotations[v1alpha1.AnnotationEditedBy]) {
		if strings.TrimSuffix(editor, "\n") != operator {
			return false
		}
	}
	return true
}

// objectNameOf is the name of the object a pipeline's AnnotationObject names
// (namespace/name, or name).
func objectNameOf(p *v1alpha1.Pipeline) string {
	object := p.Annotations[v1alpha1.AnnotationObject]
	return object[strings.LastIndex(object, "/")+1:]
}
