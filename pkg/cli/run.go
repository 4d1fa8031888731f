package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/flagpairs"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
)

func newRunCommand(o *options) *cobra.Command {
	var (
		pairs        []string
		name, sa     string
		onFailure    string
		watch        bool
		timeout      time.Duration
		updatePolicy string
	)
	cmd := &cobra.Command{
		Use:   "run TEMPLATE [-p NAME=VALUE...]",
		Short: "Run a pipeline template: create a Pipeline from it",
		Long: `Create a Pipeline that runs a PipelineTemplate with the given parameters. The operator
checks them against the template's declarations (required ones, defaults, unknown ones) and
says in the pipeline's Ready condition what is wrong. With --watch, follow it as
kubectl stepwise watch does.`,
		Example:           `  kubectl stepwise run retire-node -n node-ops -p node=worker-3 --watch`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, templateNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			params, err := flagpairs.Parse("parameter", pairs)
			if err != nil {
				return err
			}
			ns, c, err := o.scope()
			if err != nil {
				return err
			}
			p := &v1alpha1.Pipeline{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: v1alpha1.PipelineSpec{
					TemplateRef:        &v1alpha1.TemplateRef{Name: args[0]},
					Params:             params,
					ServiceAccountName: sa,
					OnFailure:          v1alpha1.FailurePolicy(onFailure),
					UpdatePolicy:       v1alpha1.UpdatePolicy(updatePolicy),
				},
			}
			if name == "" {
				p.GenerateName = args[0] + "-"
			}
			created, err := c.Stepwise.StepwiseV1alpha1().Pipelines(ns).Create(cmd.Context(), p, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create a pipeline of template %s/%s: %w", ns, args[0], err)
			}
			_, _ = fmt.Fprintf(o.streams.Out, "pipeline.stepwise.dev/%s created\n", termsafe.OneLine(created.Name, 0))
			if !watch {
				return nil
			}
			var r renderer = &lineRenderer{w: o.streams.Out}
			if printers.IsTerminal(o.streams.Out) {
				r = &screenRenderer{w: o.streams.Out}
			}
			return watchPipeline(cmd.Context(), c.Stepwise, ns, created.Name, timeout, r)
		},
	}
	cmd.Flags().StringArrayVarP(&pairs, "param", "p", nil, "A parameter, NAME=VALUE; repeat for each.")
	cmd.Flags().StringVar(&name, "name", "", "Name of the pipeline. Default: TEMPLATE-xxxxx.")
	cmd.Flags().StringVar(&sa, "service-account", "", "ServiceAccount the steps act as. Default: the namespace's default.")
	cmd.Flags().StringVar(&onFailure, "on-failure", "", "Stop or Teardown. Default: the template's, else Stop.")
	cmd.Flags().StringVar(&updatePolicy, "update-policy", "", "Immutable (default) or Rerun.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Follow the pipeline until it is Ready or has failed.")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "With --watch, how long to wait before giving up.")
	return cmd
}
