package v1alpha1

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestAuthorshipOf(t *testing.T) {
	many := make([]string, MaxEditors+1)
	for i := range many {
		many[i] = "u" + string(rune('a'+i))
	}
	tests := []struct {
		name        string
		annotations map[string]string
		generation  int64
		want        Authorship
	}{
		{name: "made, never changed", annotations: map[string]string{AnnotationCreatedBy: "alice"}, generation: 1,
			want: Authorship{CreatedBy: "alice"}},
		{name: "changed by some, one a line, each once", generation: 5,
			annotations: map[string]string{AnnotationCreatedBy: "alice", AnnotationEditedBy: "bob\ncarol\nbob"},
			want:        Authorship{CreatedBy: "alice", EditedBy: []string{"bob", "carol"}}},
		{name: "no creator recorded", annotations: map[string]string{AnnotationEditedBy: "bob"}, generation: 2,
			want: Authorship{EditedBy: []string{"bob"}, Unrecorded: AuthorsCreatorUnknown}},
		{name: "changed before changes were recorded", annotations: map[string]string{AnnotationCreatedBy: "alice"}, generation: 2,
			want: Authorship{CreatedBy: "alice", Unrecorded: AuthorsEditorsUnknown}},
		{name: "an empty line: more changed it", generation: 30,
			annotations: map[string]string{AnnotationCreatedBy: "alice", AnnotationEditedBy: "bob\n"},
			want:        Authorship{CreatedBy: "alice", EditedBy: []string{"bob"}, Unrecorded: AuthorsEditorsUnknown}},
		{name: "more names than kept", generation: 30,
			annotations: map[string]string{AnnotationCreatedBy: "alice", AnnotationEditedBy: strings.Join(many, "\n")},
			want:        Authorship{CreatedBy: "alice", EditedBy: many[:MaxEditors], Unrecorded: AuthorsEditorsUnknown}},
		{name: "a name longer than kept is not cut", generation: 2,
			annotations: map[string]string{AnnotationCreatedBy: "alice", AnnotationEditedBy: strings.Repeat("b", maxUserLength+1)},
			want:        Authorship{CreatedBy: "alice", Unrecorded: AuthorsEditorsUnknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &PipelineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", UID: "uid-t", Generation: tt.generation, Annotations: tt.annotations}}
			tt.want.Kind, tt.want.Name, tt.want.UID = "PipelineTemplate", "t", "uid-t"
			assert.Equal(t, tt.want, AuthorshipOf("PipelineTemplate", obj))
		})
	}
}

func TestTriggerControls(t *testing.T) {
	trig := &PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", UID: "uid-retire"}}
	owner := func(apiVersion, kind, name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(controller)}
	}
	ours := owner("stepwise.dev/v1alpha1", "PipelineTrigger", "retire", "uid-retire", true)
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		labels map[string]string
		ns     string
		want   bool
	}{
		{name: "controlled by it, labelled with it", owners: []metav1.OwnerReference{ours},
			labels: map[string]string{LabelTrigger: "retire", LabelTriggerUID: "uid-retire"}, want: true},
		{name: "controlled by it, without the UID label", owners: []metav1.OwnerReference{ours}, want: true},
		{name: "its UID label, no owner (as the trigger creates them; the admission policy guards the label)",
			labels: map[string]string{LabelTrigger: "retire", LabelTriggerUID: "uid-retire"}, want: true},
		{name: "its name label alone", labels: map[string]string{LabelTrigger: "retire"}},
		{name: "another trigger's UID label", labels: map[string]string{LabelTrigger: "retire", LabelTriggerUID: "uid-earlier"}},
		{name: "its labels, another controller", labels: map[string]string{LabelTriggerUID: "uid-retire"},
			owners: []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "rs", "uid-rs", true)}},
		{name: "an owner, not the controller", owners: []metav1.OwnerReference{owner("stepwise.dev/v1alpha1", "PipelineTrigger", "retire", "uid-retire", false)}},
		{name: "a trigger of the same name before", owners: []metav1.OwnerReference{owner("stepwise.dev/v1alpha1", "PipelineTrigger", "retire", "uid-earlier", true)}},
		{name: "another group's kind of that name", owners: []metav1.OwnerReference{owner("example.com/v1", "PipelineTrigger", "retire", "uid-retire", true)}},
		{name: "its UID under another name", owners: []metav1.OwnerReference{owner("stepwise.dev/v1alpha1", "PipelineTrigger", "other", "uid-retire", true)}},
		{name: "the UID label disagrees", owners: []metav1.OwnerReference{ours}, labels: map[string]string{LabelTriggerUID: "uid-other"}},
		{name: "another namespace", owners: []metav1.OwnerReference{ours}, ns: "elsewhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.ns
			if ns == "" {
				ns = "ns"
			}
			p := &Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: tt.labels, OwnerReferences: tt.owners}}
			assert.Equal(t, tt.want, trig.Controls(p))
		})
	}
}
