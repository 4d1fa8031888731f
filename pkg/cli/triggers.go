package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

func newTriggersCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "triggers [NAME]",
		Short: "List pipeline triggers, or show one with its queue",
		Long: `List the PipelineTriggers of a namespace: the kind they watch, their template, how many
objects match, how many pipelines run and how many objects wait. Name a trigger to see its
condition and its queue, in the order the waiting objects will start.`,
		Example: `  kubectl stepwise triggers -n node-ops
  kubectl stepwise triggers retire-labelled -n node-ops`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNames(o, triggerNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, c, err := o.scopeFor(output)
			if err != nil {
				return err
			}
			triggers := c.Stepwise.StepwiseV1alpha1().PipelineTriggers(ns)
			var items []v1alpha1.PipelineTrigger
			var obj any
			if len(args) == 1 {
				t, err := triggers.Get(cmd.Context(), args[0], metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("get trigger %s/%s: %w", ns, args[0], err)
				}
				items, obj = []v1alpha1.PipelineTrigger{*t}, t
			} else {
				list, err := triggers.List(cmd.Context(), metav1.ListOptions{})
				if err != nil {
					return fmt.Errorf("list triggers in %s: %w", ns, err)
				}
				items, obj = list.Items, list
			}
			switch {
			case output != "":
				data, err := termsafe.Encode(obj, output)
				if err != nil {
					return fmt.Errorf("encode triggers: %w", err)
				}
				_, err = o.streams.Out.Write(data)
				return err
			case len(args) == 1:
				return PrintTriggerDetails(o.streams.Out, &items[0])
			}
			return PrintTriggers(o.streams.Out, items)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml. Default: a table.")
	cmd.AddCommand(newTriggerPauseCommand(o), newTriggerResumeCommand(o))
	return cmd
}

// PrintTriggers writes a table of triggers, every value through termsafe.OneLine.
func PrintTriggers(w io.Writer, triggers []v1alpha1.PipelineTrigger) error {
	tw := printers.GetNewTabWriter(w)
	_, _ = fmt.Fprintln(tw, "TRIGGER\tKIND\tTEMPLATE\tMATCHED\tRUNNING\tWAITING\tSUCCEEDED\tFAILED\tREADY")
	for _, t := range triggers {
		st := t.Status
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", termsafe.OneLine(t.Name, 0), termsafe.OneLine(t.Spec.Resource.Kind, 0),
			termsafe.OneLine(t.Spec.TemplateRef.Name, 0), st.Matched, st.Running, st.Waiting, st.Succeeded, st.Failed, termsafe.OneLine(readyOf(t.Status.Conditions), 0))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write triggers: %w", err)
	}
	return nil
}

// PrintTriggerDetails writes one trigger with its condition and queue.
func PrintTriggerDetails(w io.Writer, t *v1alpha1.PipelineTrigger) error {
	tw := printers.GetNewTabWriter(w)
	st := t.Status
	_, _ = fmt.Fprintf(tw, "Trigger:\t%s/%s\n", termsafe.OneLine(t.Namespace, 0), termsafe.OneLine(t.Name, 0))
	_, _ = fmt.Fprintf(tw, "Watches:\t%s %s\n", termsafe.OneLine(t.Spec.Resource.APIVersion, 0), termsafe.OneLine(t.Spec.Resource.Kind, 0))
	_, _ = fmt.Fprintf(tw, "Template:\t%s\n", termsafe.OneLine(t.Spec.TemplateRef.Name, 0))
	_, _ = fmt.Fprintf(tw, "Concurrency:\t%d\n", t.Spec.Concurrency)
	_, _ = fmt.Fprintf(tw, "Suspended:\t%t\n", t.Spec.Suspend)
	if p := st.Paused; p != nil {
		_, _ = fmt.Fprintf(tw, "Paused:\tby %s since %s: %s\n", termsafe.OneLine(p.By, 0), p.Since.UTC().Format(time.RFC3339), termsafe.OneLine(p.Reason, 0))
	}
	_, _ = fmt.Fprintf(tw, "Failure budget:\t%d left of %d\n", st.FailureBudgetLeft, rules.FailureBudget(t))
	for _, f := range st.Failures {
		_, _ = fmt.Fprintf(tw, "  failed\t%s (%s, step %s) at %s\n", termsafe.OneLine(f.Pipeline, 0), termsafe.OneLine(f.Object, 0),
			termsafe.OneLine(f.Step, 0), f.At.UTC().Format(time.RFC3339))
	}
	if r := st.Resumed; r != nil {
		_, _ = fmt.Fprintf(tw, "Resumed:\tby %s at %s\n", termsafe.OneLine(r.By, 0), r.At.UTC().Format(time.RFC3339))
	}
	if b := t.Spec.NodeBudgetRef; b != nil {
		_, _ = fmt.Fprintf(tw, "Node budget:\t%s\n", termsafe.OneLine(b.Name, 0))
	}
	for _, g := range st.Gates {
		state := "holds"
		if !g.Holds {
			state = "does not hold: " + g.Message
		}
		_, _ = fmt.Fprintf(tw, "Gate %s:\t%s (since %s)\n", termsafe.OneLine(g.Name, 0), termsafe.OneLine(state, 0), g.Since.UTC().Format(time.RFC3339))
	}
	if g := st.GateStop; g != nil {
		_, _ = fmt.Fprintf(tw, "Stopped by gate:\t%s, not holding since %s: %s\n", termsafe.OneLine(g.Gate, 0), g.Since.UTC().Format(time.RFC3339),
			termsafe.OneLine(g.Message, 0))
	}
	_, _ = fmt.Fprintf(tw, "Objects:\t%d matched, %d running, %d waiting, %d succeeded, %d failed\n",
		st.Matched, st.Running, st.Waiting, st.Succeeded, st.Failed)
	if st.AwaitingApproval > 0 {
		_, _ = fmt.Fprintf(tw, "Approvals:\t%d pipelines wait for approval: kubectl stepwise approve --trigger %s --all-waiting -n %s\n",
			st.AwaitingApproval, termsafe.OneLine(t.Name, 0), termsafe.OneLine(t.Namespace, 0))
	}
	if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); ready != nil {
		_, _ = fmt.Fprintf(tw, "Ready:\t%s (%s) %s\n", ready.Status, termsafe.OneLine(ready.Reason, 0), termsafe.OneLine(ready.Message, 0))
	}
	if len(st.Queue) == 0 {
		_, _ = fmt.Fprintf(tw, "Queue:\tempty\n")
	} else {
		_, _ = fmt.Fprintf(tw, "Queue:\n")
		for i, obj := range st.Queue {
			_, _ = fmt.Fprintf(tw, "  %d\t%s\n", i+1, termsafe.OneLine(obj, 0))
		}
		if int(st.Waiting) > len(st.Queue) {
			_, _ = fmt.Fprintf(tw, "  …\t%d more\n", int(st.Waiting)-len(st.Queue))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write trigger: %w", err)
	}
	return nil
}

// readyOf is the status of a Ready condition, with its reason when it is not True.
func readyOf(conditions []metav1.Condition) string {
	ready := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
	switch {
	case ready == nil:
		return "-"
	case ready.Status == metav1.ConditionTrue:
		return "True"
	default:
		return strings.TrimSpace(string(ready.Status) + " " + ready.Reason)
	}
}
