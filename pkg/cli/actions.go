package cli

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func newRetryCommand(o *options) *cobra.Command {
	var step string
	cmd := &cobra.Command{
		Use:   "retry NAME",
		Short: "Retry a failed pipeline, from its failed step or from an earlier one",
		Long: `Retry a failed pipeline: the failed step runs again and the pipeline goes on from there.
With --step, the steps from that one on run again (a retry never skips the failed step).
For a pipeline whose teardown is blocked, the teardown is tried again.

It sets the annotation ` + v1alpha1.RetryAnnotation + `, which the operator removes once it
has recorded the retry.`,
		Example: `  kubectl stepwise retry retire-node-3 -n ops
  kubectl stepwise retry retire-node-3 -n ops --step drain`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			pipelines := c.Stepwise.StepwiseV1alpha1().Pipelines(ns)
			// Read only to refuse what the engine would ignore; the write is a patch of
			// one annotation.
			p, err := pipelines.Get(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get pipeline %s/%s: %w", ns, args[0], err)
			}
			if step != "" && !slices.ContainsFunc(p.Spec.Steps, func(s v1alpha1.Step) bool { return s.Name == step }) {
				return fmt.Errorf("pipeline %s/%s has no step %q", ns, p.Name, step)
			}
			if !p.Failed() {
				return fmt.Errorf("pipeline %s/%s has not failed (phase %s): there is nothing to retry", ns, p.Name, p.Status.Phase)
			}
			patch, err := json.Marshal(map[string]any{
				"metadata": map[string]any{"annotations": map[string]string{v1alpha1.RetryAnnotation: step}},
			})
			if err != nil {
				return fmt.Errorf("encode patch: %w", err)
			}
			if _, err := pipelines.Patch(cmd.Context(), p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("annotate pipeline %s/%s for a retry: %w", ns, p.Name, err)
			}
			from := "its failed step " + p.Status.CurrentStep
			if step != "" {
				from = "step " + step
			}
			_, _ = fmt.Fprintf(o.streams.Out, "pipeline.stepwise.dev/%s retry requested from %s\n", oneLine(p.Name, 0), oneLine(from, 0))
			return nil
		},
	}
	cmd.Flags().StringVar(&step, "step", "", "Retry from this step on. Default: the failed step.")
	return cmd
}

// newSuspendCommand returns suspend (suspend true) or resume (false).
func newSuspendCommand(o *options, suspend bool) *cobra.Command {
	use, short, long, done := "suspend NAME", "Stop a pipeline before its next hook",
		"Stop a pipeline before its next hook: the hook running now finishes, nothing new starts.\nIt sets spec.suspend to true.",
		"suspended"
	if !suspend {
		use, short, long, done = "resume NAME", "Resume a suspended pipeline where it stopped",
			"Resume a suspended pipeline where it stopped. It sets spec.suspend to false.", "resumed"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			// A merge patch of the one field: no read-modify-write race with the operator
			// or another user.
			patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
			p, err := c.Stepwise.StepwiseV1alpha1().Pipelines(ns).Patch(cmd.Context(), args[0], types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				return fmt.Errorf("set spec.suspend=%t on pipeline %s/%s: %w", suspend, ns, args[0], err)
			}
			_, _ = fmt.Fprintf(o.streams.Out, "pipeline.stepwise.dev/%s %s\n", oneLine(p.Name, 0), done)
			return nil
		},
	}
}
