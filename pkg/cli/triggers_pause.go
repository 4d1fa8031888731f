package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

func newTriggerPauseCommand(o *options) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "pause NAME",
		Short: "Pause a trigger in your name: it starts nothing until resumed",
		Long: `Pause the PipelineTrigger NAME: it starts no pipeline until someone resumes it; the
pipelines running go on. The trigger records who paused it (the user the API server
authenticates you as, which the install's admission policy checks) and since when, and
its Ready condition says so (reason Paused).`,
		Example:           `  kubectl stepwise triggers pause retire-labelled -n node-ops --reason "INC-42: drains fail"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, triggerNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, c, err := o.scope()
			if err != nil {
				return err
			}
			t, err := pipelineops.PauseTrigger(cmd.Context(), c.Kube, c.Stepwise, ns, args[0], reason)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.streams.Out, "trigger %s/%s paused by %s\n", termsafe.OneLine(ns, 0), termsafe.OneLine(args[0], 0),
				termsafe.OneLine(t.Spec.Pause.By, 0))
			return err
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "Why, in a few words (at most 256 characters): an incident's name.")
	return cmd
}

func newTriggerResumeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a trigger in your name: lift its pause, and count its failures from zero",
		Long: `Resume the PipelineTrigger NAME: lift a pause (kubectl stepwise triggers pause), and
count its failed pipelines from zero, so that one stopped by its failure budget starts
again. The trigger records who resumed it and when it saw the resume.`,
		Example:           `  kubectl stepwise triggers resume retire-labelled -n node-ops`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, triggerNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, c, err := o.scope()
			if err != nil {
				return err
			}
			t, err := pipelineops.ResumeTrigger(cmd.Context(), c.Kube, c.Stepwise, ns, args[0], time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.streams.Out, "trigger %s/%s resumed by %s\n", termsafe.OneLine(ns, 0), termsafe.OneLine(args[0], 0),
				termsafe.OneLine(t.Spec.Resume.By, 0))
			return err
		},
	}
}
