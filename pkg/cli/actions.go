package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

func newRetryCommand(o *options) *cobra.Command {
	var step string
	cmd := o.named(&cobra.Command{
		Use:   "retry NAME",
		Short: "Retry a failed pipeline, from its failed step or from an earlier one",
		Long: `Retry a failed pipeline: the failed step runs again and the pipeline goes on from there.
With --step, the steps from that one on run again (a retry never skips the failed step).
For a pipeline whose teardown is blocked, the teardown is tried again.

It sets the annotation ` + v1alpha1.RetryAnnotation + `, which the operator removes once it
has recorded the retry.`,
		Example: `  kubectl stepwise retry retire-node-3 -n ops
  kubectl stepwise retry retire-node-3 -n ops --step drain`,
	}, pipelineNames, func(ctx context.Context, ns string, c *Clients, name string) error {
		p, err := pipelineops.Retry(ctx, c.Stepwise, ns, name, step)
		if err != nil {
			return err
		}
		from := "its failed step " + p.Status.CurrentStep
		if step != "" {
			from = "step " + step
		}
		_, _ = fmt.Fprintf(o.streams.Out, "pipeline.stepwise.dev/%s retry requested from %s\n", termsafe.OneLine(p.Name, 0), termsafe.OneLine(from, 0))
		return nil
	})
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
	return o.named(&cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
	}, pipelineNames, func(ctx context.Context, ns string, c *Clients, name string) error {
		p, err := pipelineops.SetSuspend(ctx, c.Stepwise, ns, name, suspend)
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(o.streams.Out, "pipeline.stepwise.dev/%s %s\n", termsafe.OneLine(p.Name, 0), done)
		return nil
	})
}
