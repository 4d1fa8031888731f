package rules

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// TestNoTriggerMatchesATriggersPipeline: a Pipeline a trigger made (it carries
// LabelTrigger) is no trigger's object; other Pipelines, and objects of other kinds with
// that label, are.
func TestNoTriggerMatchesATriggersPipeline(t *testing.T) {
	tests := []struct {
		name   string
		gr     schema.GroupResource
		labels map[string]string
		want   bool
	}{
		{name: "a Pipeline a trigger made", gr: pipelinesGVR.GroupResource(),
			labels: map[string]string{v1alpha1.LabelTrigger: "feed", v1alpha1.LabelTriggerUID: "feed-uid"}, want: true},
		{name: "a Pipeline an old version made", gr: pipelinesGVR.GroupResource(), labels: map[string]string{v1alpha1.LabelTrigger: "other"}, want: true},
		{name: "a Pipeline with an empty trigger label", gr: pipelinesGVR.GroupResource(), labels: map[string]string{v1alpha1.LabelTrigger: ""}, want: true},
		{name: "a Pipeline a person made", gr: pipelinesGVR.GroupResource(), labels: map[string]string{"team": "ops"}},
		{name: "a rerun of a trigger's Pipeline", gr: pipelinesGVR.GroupResource(), labels: map[string]string{v1alpha1.LabelObjectUID: "uid-n1"}},
		{name: "a WebApp with the label", gr: webappsGVR.GroupResource(), labels: map[string]string{v1alpha1.LabelTrigger: "feed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, MadeByTrigger(tt.gr, triggertest.PipelineObject("p", tt.labels)))
		})
	}
}

func TestParseMatcher(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*v1alpha1.PipelineTrigger)
		wantErr string
	}{
		{name: "selector and fields"},
		{name: "no selector", change: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Selector = nil }},
		{name: "a selector that does not parse", change: func(tr *v1alpha1.PipelineTrigger) {
			tr.Spec.Selector = &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}
		}, wantErr: "spec.selector: "},
		{name: "matchFields that do not parse", change: func(tr *v1alpha1.PipelineTrigger) {
			tr.Spec.MatchFields = []v1alpha1.FieldRequirement{{Field: "spec[x]", Operator: v1alpha1.FieldExists}}
		}, wantErr: "spec.matchFields[0].field: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig := triggertest.Trigger()
			trig.Spec.MatchFields = []v1alpha1.FieldRequirement{{Field: "spec.unschedulable", Operator: v1alpha1.FieldDoesNotExist}}
			if tt.change != nil {
				tt.change(trig)
			}
			m, err := ParseMatcher(trig)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), tt.wantErr), err.Error())
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, m.Selector())
		})
	}
}

// TestMatcherMatches: an object matches when both its labels and its fields do.
func TestMatcherMatches(t *testing.T) {
	cordoned := triggertest.Node("cordoned", 0, retiring)
	require.NoError(t, unstructured.SetNestedField(cordoned.Object, true, "spec", "unschedulable"))
	tests := []struct {
		name     string
		selector *v1alpha1.LabelSelector
		obj      *unstructured.Unstructured
		want     bool
	}{
		{name: "labels and fields", selector: &v1alpha1.LabelSelector{MatchLabels: retiring}, obj: triggertest.Node("n1", 0, retiring), want: true},
		{name: "labels, not fields", selector: &v1alpha1.LabelSelector{MatchLabels: retiring}, obj: cordoned},
		{name: "fields, not labels", selector: &v1alpha1.LabelSelector{MatchLabels: retiring}, obj: triggertest.Node("n1", 0, nil)},
		{name: "no selector: fields alone", obj: triggertest.Node("n1", 0, nil), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig := triggertest.Trigger()
			trig.Spec.Selector = tt.selector
			trig.Spec.MatchFields = []v1alpha1.FieldRequirement{{Field: "spec.unschedulable", Operator: v1alpha1.FieldDoesNotExist}}
			m, err := ParseMatcher(trig)
			require.NoError(t, err)
			assert.Equal(t, tt.want, m.Matches(tt.obj))
		})
	}
}

// TestEligible: an object being deleted counts as gone, and a Pipeline a trigger made is
// none; anything else a trigger looks at.
func TestEligible(t *testing.T) {
	deleting := triggertest.Node("n1", 0, nil)
	now := metav1.NewTime(start)
	deleting.SetDeletionTimestamp(&now)
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  *unstructured.Unstructured
		want bool
	}{
		{name: "a node", gr: schema.GroupResource{Resource: "nodes"}, obj: triggertest.Node("n1", 0, nil), want: true},
		{name: "a node being deleted", gr: schema.GroupResource{Resource: "nodes"}, obj: deleting},
		{name: "a Pipeline a person made", gr: pipelinesGVR.GroupResource(), obj: triggertest.PipelineObject("p", nil), want: true},
		{name: "a Pipeline a trigger made", gr: pipelinesGVR.GroupResource(),
			obj: triggertest.PipelineObject("p", map[string]string{v1alpha1.LabelTrigger: "feed"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Eligible(tt.gr, tt.obj))
		})
	}
}
