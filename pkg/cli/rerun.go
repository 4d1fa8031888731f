package cli

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
)

// What a rerun does not copy: the labels and annotations a trigger writes on its pipeline
// (rules.PipelineFor), which tie it to the trigger, its object and its NodeBudget (the
// trigger would count the copy, and maybe delete it, as its own; a budget would count it
// against a node), and the engine's one-time requests. A rerun is a person's pipeline.
var (
	rerunDropsLabels = []string{v1alpha1.LabelTrigger, v1alpha1.LabelTriggerUID, v1alpha1.LabelObjectUID,
		v1alpha1.LabelNodeBudget}
	rerunDropsAnnotations = []string{v1alpha1.AnnotationObject, v1alpha1.AnnotationResume, v1alpha1.RetryAnnotation,
		v1alpha1.TeardownPolicyAnnotation, v1alpha1.AnnotationCreatedBy, v1alpha1.AnnotationEditedBy,
		"kubectl.kubernetes.io/last-applied-configuration"}
)

// rerunOf is the new Pipeline that runs p's spec again: the same spec (suspend off), the
// labels and annotations but rerunDrops*, named after p by the API server.
func rerunOf(p *v1alpha1.Pipeline) *v1alpha1.Pipeline {
	labels := maps.Clone(p.Labels)
	for _, key := range rerunDropsLabels {
		delete(labels, key)
	}
	annotations := maps.Clone(p.Annotations)
	for _, key := range rerunDropsAnnotations {
		delete(annotations, key)
	}
	spec := *p.Spec.DeepCopy()
	spec.Suspend = false
	prefix := p.Name
	if len(prefix) > 57 {
		prefix = prefix[:57] // the API server adds 5 characters; names stay under 63
	}
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: prefix + "-",
			Namespace:    p.Namespace,
			Labels:       labels,
			Annotations:  annotations,
		},
		Spec: spec,
	}
}

func newRerunCommand(o *options) *cobra.Command {
	return o.named(&cobra.Command{
		Use:   "rerun NAME",
		Short: "Run a pipeline again, as a new Pipeline with the same spec",
		Long: `Run a pipeline again: create a new Pipeline with the same spec (named NAME-xxxxx).

The steps of a pipeline cannot change once it exists (updatePolicy Immutable, the default),
and a finished pipeline never runs again by itself: running destructive steps again is
always a new Pipeline, with its own record and its own teardown. Edit the new one with
kubectl edit before it starts, or apply a changed copy of the manifest instead.

The new Pipeline keeps the labels of NAME but those a trigger writes (` + strings.Join(rerunDropsLabels, ", ") + `):
no PipelineTrigger counts it, or deletes it, as its own, and no NodeBudget counts it.`,
		Example: `  kubectl stepwise rerun retire-node-3 -n ops`,
	}, pipelineNames, func(ctx context.Context, ns string, c *Clients, name string) error {
		pipelines := c.Stepwise.StepwiseV1alpha1().Pipelines(ns)
		p, err := pipelines.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get pipeline %s/%s: %w", ns, name, err)
		}
		created, err := pipelines.Create(ctx, rerunOf(p), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create a rerun of pipeline %s/%s: %w", ns, p.Name, err)
		}
		_, _ = fmt.Fprintf(o.streams.Out, "pipeline.stepwise.dev/%s created, a rerun of %s\n", termsafe.OneLine(created.Name, 0), termsafe.OneLine(p.Name, 0))
		return nil
	})
}
