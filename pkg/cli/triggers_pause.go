package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

func newTriggerPauseCommand(o *options) *cobra.Command {
	var reason string
	cmd := o.named(&cobra.Command{
		Use:   "pause NAME",
		Short: "Pause a trigger in your name: it starts nothing until resumed",
		Long: `Pause the PipelineTrigger NAME: it starts no pipeline until someone resumes it; the
pipelines running go on. The trigger records who paused it (the user the API server
authenticates you as, which the install's admission policy checks) and since when, and
its Ready condition says so (reason Paused).`,
		Example: `  kubectl stepwise triggers pause retire-labelled -n node-ops --reason "INC-42: drains fail"`,
	}, triggerNames, func(ctx context.Context, ns string, c *Clients, name string) error {
		t, err := pipelineops.PauseTrigger(ctx, c.Kube, c.Stepwise, ns, name, reason)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.streams.Out, "trigger %s/%s paused by %s\n", termsafe.OneLine(ns, 0), termsafe.OneLine(name, 0),
			termsafe.OneLine(t.Spec.Pause.By, 0))
		return err
	})
	cmd.Flags().StringVar(&reason, "reason", "", "Why, in a few words (at most 256 characters): an incident's name.")
	return cmd
}

func newTriggerResumeCommand(o *options) *cobra.Command {
	return o.named(&cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a trigger in your name: lift its pause, and count its failures from zero",
		Long: `Resume the PipelineTrigger NAME: lift a pause (kubectl stepwise triggers pause), and
count its failed pipelines from zero, so that one stopped by its failure budget starts
again. The trigger records who resumed it and when it saw the resume.`,
		Example: `  kubectl stepwise triggers resume retire-labelled -n node-ops`,
	}, triggerNames, func(ctx context.Context, ns string, c *Clients, name string) error {
		t, err := pipelineops.ResumeTrigger(ctx, c.Kube, c.Stepwise, ns, name, time.Now())
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.streams.Out, "trigger %s/%s resumed by %s\n", termsafe.OneLine(ns, 0), termsafe.OneLine(name, 0),
			termsafe.OneLine(t.Spec.Resume.By, 0))
		return err
	})
}
