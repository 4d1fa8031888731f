package pipelineops

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// PlanLabel marks the dry-run pipelines a Planner makes, so that one left behind (a killed
// command, one kept on purpose) is easy to find: kubectl get swp -l stepwise.dev/plan=true.
const PlanLabel = "stepwise.dev/plan"

// DryRunOf is the dry-run pipeline that plans p's spec: dryRun on, not suspended, named
// plan-NAME-xxxxx by the API server and labelled as a plan. It takes none of p's metadata:
// a trigger's labels would count it as the trigger's pipeline, an owner could collect it,
// and the retry annotation would mean nothing to it. It plans as the pipeline p names
// (stepwise.dev/plan-as): what an edit of that pipeline would change.
func DryRunOf(p *v1alpha1.Pipeline, name string) *v1alpha1.Pipeline {
	spec := *p.Spec.DeepCopy()
	spec.DryRun, spec.Suspend = true, false
	prefix := "plan-" + name
	if len(prefix) > 57 {
		prefix = prefix[:57] // the API server adds 5 characters; names stay under 63
	}
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: strings.TrimRight(prefix, "-.") + "-",
			Labels:       map[string]string{PlanLabel: "true"},
			Annotations:  planAs(p.Name),
		},
		Spec: spec,
	}
}

// planAs is the annotation that makes a dry run plan as the pipeline name; none for a
// manifest with only a generateName.
func planAs(name string) map[string]string {
	if name == "" {
		return nil
	}
	return map[string]string{v1alpha1.PlanAsAnnotation: name}
}

// TemplateDryRun is the dry-run pipeline that plans a pipeline of the template ns/template
// as `kubectl stepwise run` would create it: with params, acting as serviceAccount (empty:
// the namespace's default). The template must exist: a real pipeline waits for a missing
// one, so its plan would only wait until the Planner's timeout.
func TemplateDryRun(ctx context.Context, client clientset.Interface, ns, template string, params map[string]string, serviceAccount string) (*v1alpha1.Pipeline, error) {
	if _, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Get(ctx, template, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("get template %s/%s: %w", ns, template, err)
	}
	p := &v1alpha1.Pipeline{Spec: v1alpha1.PipelineSpec{
		TemplateRef:        &v1alpha1.TemplateRef{Name: template},
		Params:             params,
		ServiceAccountName: serviceAccount,
	}}
	return DryRunOf(p, template), nil
}
