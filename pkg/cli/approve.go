package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// decideOptions are approve's and reject's flags.
type decideOptions struct {
	*options
	decision   v1alpha1.ApprovalDecision
	comment    string
	trigger    string
	allWaiting bool
}

// newDecideCommand returns approve (decision Approve) or reject (Reject).
func newDecideCommand(o *options, decision v1alpha1.ApprovalDecision) *cobra.Command {
	d := &decideOptions{options: o, decision: decision}
	verb := d.verb()
	short := "Approve a step that waits for approval, in your name"
	long := `Approve a step of the pipeline PIPELINE that waits for approval (a step with approval
set, in phase AwaitingApproval): STEP, or the one step that waits when you name none.
The step's hooks run once as many different people as it asks for have approved it;
kubectl stepwise status PIPELINE shows who has, and who it waits for.`
	comment := "Why, in a few words (at most 1024 bytes): a change's or an incident's name."
	example := `  # The one step of retire-node-3 that waits
  kubectl stepwise approve retire-node-3 -n ops

  # A named step, with a comment
  kubectl stepwise approve retire-node-3 terminate -n ops --comment "CHG-1234"

  # Every step that waits in the pipelines of a trigger
  kubectl stepwise approve --trigger retire-labelled --all-waiting -n node-ops --comment "CHG-1234"`
	if decision == v1alpha1.ApprovalReject {
		short = "Reject a step that waits for approval, in your name: it fails"
		long = `Reject a step of the pipeline PIPELINE that waits for approval (a step with approval
set, in phase AwaitingApproval): STEP, or the one step that waits when you name none.
The step fails with your comment as its message, and the pipeline's onFailure applies.
--comment is required: say why.`
		comment = "Why (required, at most 1024 bytes): the failed step's message."
		example = `  kubectl stepwise reject retire-node-3 -n ops --comment "not during the freeze"
  kubectl stepwise reject retire-node-3 terminate -n ops --comment "INC-42: wrong node"

  # Every step that waits in the pipelines of a trigger
  kubectl stepwise reject --trigger retire-labelled --all-waiting -n node-ops --comment "freeze"`
	}
	long += `

With --trigger TRIGGER --all-waiting, ` + verb + ` every step that waits in the pipelines the
PipelineTrigger TRIGGER runs now (those it controls: their ownerReference, not a label
anyone may copy), one Approval each; it stops at the first error.

Each decision is an Approval (approvals.stepwise.dev), created in your name: the user and
groups the API server authenticates you as. The install's admission policy refuses it
unless you have the verb approve on the pipeline (RBAC: verbs [approve] on
pipelines.stepwise.dev, resourceNames to narrow it). A step may also name who may approve
it, and refuse whoever made or changed the pipeline, its template or its trigger (four
eyes): a decision by anyone else is recorded, ignored, and status says why. An Approval
never changes: a second approval of yours counts once, and a rejection that counts (yours
after your approval, or anyone's) fails a step that still waits, even one some have
approved.`
	cmd := &cobra.Command{
		Use:     verb + " (PIPELINE [STEP] | --trigger TRIGGER --all-waiting)",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cobra.MaximumNArgs(2),
		// PIPELINE; STEP is not completed.
		ValidArgsFunction: completeNames(o, pipelineNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := d.check(args); err != nil {
				return err
			}
			ns, c, err := o.scope()
			if err != nil {
				return err
			}
			if d.trigger != "" {
				// What was made is printed before the error that stopped the rest.
				made, notControlled, decideErr := pipelineops.DecideTrigger(cmd.Context(), c.Kube, c.Stepwise, ns, d.trigger, d.decision, d.comment)
				for _, a := range made {
					if err := printDecision(o.streams.Out, a); err != nil {
						return err
					}
				}
				for _, name := range notControlled {
					if _, err := fmt.Fprintf(o.streams.ErrOut, "warning: pipeline %s/%s waits and carries the UID label of trigger %s, "+
						"but names another controller: not %s; if it is the trigger's, %s it by name: "+
						"kubectl stepwise %s %s -n %s\n", termsafe.OneLine(ns, 0), termsafe.OneLine(name, 0), termsafe.OneLine(d.trigger, 0),
						d.done(), verb, verb, termsafe.OneLine(name, 0), termsafe.OneLine(ns, 0)); err != nil {
						return err
					}
				}
				if decideErr != nil || len(made) > 0 {
					return decideErr
				}
				_, err = fmt.Fprintf(o.streams.Out, "no step of the pipelines of trigger %s/%s waits for approval\n",
					termsafe.OneLine(ns, 0), termsafe.OneLine(d.trigger, 0))
				return err
			}
			step := ""
			if len(args) == 2 {
				step = args[1]
			}
			a, err := pipelineops.Decide(cmd.Context(), c.Kube, c.Stepwise, ns, args[0], step, d.decision, d.comment)
			if err != nil {
				return err
			}
			return printDecision(o.streams.Out, a)
		},
	}
	f := cmd.Flags()
	f.StringVar(&d.comment, "comment", "", comment)
	f.StringVar(&d.trigger, "trigger", "", "With --all-waiting, "+verb+" every step that waits in the pipelines of this PipelineTrigger.")
	f.BoolVar(&d.allWaiting, "all-waiting", false, "With --trigger: every step that waits, not one (required with --trigger).")
	completeFlag(cmd, "trigger", completeNames(o, triggerNames))
	return cmd
}

// verb is approve or reject.
func (d *decideOptions) verb() string { return strings.ToLower(string(d.decision)) }

// done is approved or rejected.
func (d *decideOptions) done() string { return d.verb() + "d" }

// check refuses arguments and flags that do not go together.
func (d *decideOptions) check(args []string) error {
	verb := d.verb()
	switch {
	case d.trigger != "" && len(args) > 0:
		return fmt.Errorf("%s --trigger decides on the steps of the trigger's pipelines: name no PIPELINE", verb)
	case d.trigger != "" && !d.allWaiting:
		return fmt.Errorf("--trigger needs --all-waiting: %s every step that waits in the trigger's pipelines", verb)
	case d.allWaiting && d.trigger == "":
		return errors.New("--all-waiting needs --trigger TRIGGER")
	case d.trigger == "" && len(args) == 0:
		return fmt.Errorf("%s needs a PIPELINE, or --trigger TRIGGER --all-waiting", verb)
	}
	switch err := pipelineops.CheckComment(d.decision, d.comment); {
	case errors.Is(err, pipelineops.ErrRejectionWithoutComment):
		return errors.New("reject needs --comment: say why (the failed step's message)")
	case err != nil:
		return fmt.Errorf("--%w", err)
	}
	return nil
}

// printDecision writes one line of an Approval made: what was decided, on what, as whom.
func printDecision(w io.Writer, a *v1alpha1.Approval) error {
	done := "approved"
	if a.Spec.Decision == v1alpha1.ApprovalReject {
		done = "rejected"
	}
	_, err := fmt.Fprintf(w, "%s step %s of pipeline %s/%s as %s (approval %s)\n", done, termsafe.OneLine(a.Spec.Step, 0),
		termsafe.OneLine(a.Namespace, 0), termsafe.OneLine(a.Spec.Pipeline, 0), termsafe.OneLine(a.Spec.User, 0),
		termsafe.OneLine(a.Name, 0))
	return err
}
