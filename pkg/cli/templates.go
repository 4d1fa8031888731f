package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
)

func newTemplatesCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "templates",
		Short: "List the pipeline templates of a namespace",
		Long: `List the PipelineTemplates of a namespace with their parameters (* marks a required
one, = its default) and steps. Run one with kubectl stepwise run TEMPLATE -p NAME=VALUE.`,
		Example: `  kubectl stepwise templates -n node-ops`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, c, err := o.scopeFor(output)
			if err != nil {
				return err
			}
			list, err := c.Stepwise.StepwiseV1alpha1().PipelineTemplates(ns).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list templates in %s: %w", ns, err)
			}
			if output != "" {
				data, err := termsafe.Encode(list, output)
				if err != nil {
					return fmt.Errorf("encode templates: %w", err)
				}
				_, err = o.streams.Out.Write(data)
				return err
			}
			return PrintTemplates(o.streams.Out, list.Items)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml. Default: a table.")
	return cmd
}

// PrintTemplates writes a table of templates, every value through termsafe.OneLine.
func PrintTemplates(w io.Writer, templates []v1alpha1.PipelineTemplate) error {
	tw := printers.GetNewTabWriter(w)
	_, _ = fmt.Fprintln(tw, "TEMPLATE\tPARAMETERS\tSTEPS")
	for _, t := range templates {
		params := make([]string, 0, len(t.Spec.Params))
		for _, p := range t.Spec.Params {
			switch {
			case p.Required:
				params = append(params, p.Name+"*")
			case p.Default != nil:
				params = append(params, p.Name+"="+*p.Default)
			default:
				params = append(params, p.Name)
			}
		}
		steps := make([]string, 0, len(t.Spec.Steps))
		for _, s := range t.Spec.Steps {
			steps = append(steps, s.Name+"("+s.Executor+")")
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", termsafe.OneLine(t.Name, 0), termsafe.OneLine(orDash(strings.Join(params, ",")), maxMessage),
			termsafe.OneLine(strings.Join(steps, " → "), maxMessage))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write templates: %w", err)
	}
	return nil
}
