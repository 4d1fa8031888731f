package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
)

// maxMessage bounds a message in a table cell; -o yaml shows it whole.
const maxMessage = 100

func newStatusCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a pipeline's steps and its Ready condition",
		Long: `Show a pipeline's steps (executor, phase, last hook, attempts, duration, message)
and its Ready condition. A failed step's message starts with its own reason. Exits with 2
when the pipeline has failed.`,
		Example: `  kubectl stepwise status hello -n stepwise-demo
  kubectl stepwise status hello -n stepwise-demo -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, pipelineNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, c, err := o.scopeFor(output)
			if err != nil {
				return err
			}
			p, err := c.Stepwise.StepwiseV1alpha1().Pipelines(ns).Get(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get pipeline %s/%s: %w", ns, args[0], err)
			}
			if output != "" {
				err = printObject(o.streams.Out, p, output)
			} else {
				err = PrintStatus(o.streams.Out, p, time.Now())
			}
			if err != nil {
				return err
			}
			if p.Failed() {
				return errPipelineFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml. Default: a table of the steps.")
	return cmd
}

// printObject prints the pipeline as kubectl get -o json|yaml would, with control
// characters escaped (see termsafe.Encode).
func printObject(w io.Writer, p *v1alpha1.Pipeline, output string) error {
	p = p.DeepCopy()
	// Objects decoded by a typed client have no apiVersion and kind.
	p.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("Pipeline"))
	p.ManagedFields = nil // as kubectl does without --show-managed-fields
	data, err := termsafe.Encode(p, output)
	if err == nil {
		_, err = w.Write(data)
	}
	if err != nil {
		return fmt.Errorf("print pipeline: %w", err)
	}
	return nil
}

// PrintStatus writes a summary of the pipeline, a table of its steps, and the approval of
// each step that has one.
func PrintStatus(w io.Writer, p *v1alpha1.Pipeline, now time.Time) error {
	// A writer a block: the summary's columns are not the table's.
	blocks := []func(io.Writer){
		func(w io.Writer) { summary(w, p) },
		func(w io.Writer) { stepTable(w, p, now) },
	}
	for i := range p.Status.Steps {
		if s := &p.Status.Steps[i]; s.Approval != nil {
			blocks = append(blocks, func(w io.Writer) { approvalSummary(w, s) }, func(w io.Writer) { decisionTable(w, s.Approval) })
		}
	}
	for _, write := range blocks {
		tw := printers.GetNewTabWriter(w)
		write(tw)
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	}
	return nil
}

// summary writes the pipeline's lines above the table. Every value from the cluster goes
// through termsafe.OneLine.
func summary(w io.Writer, p *v1alpha1.Pipeline) {
	_, _ = fmt.Fprintf(w, "Pipeline:\t%s/%s\n", termsafe.OneLine(p.Namespace, 0), termsafe.OneLine(p.Name, 0))
	phase := string(p.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	if p.Status.Progress != "" {
		phase += " (" + p.Status.Progress + " steps succeeded)"
	}
	if p.Status.CurrentStep != "" {
		phase += ", step " + p.Status.CurrentStep
	}
	_, _ = fmt.Fprintf(w, "Phase:\t%s\n", termsafe.OneLine(phase, 0))
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
		_, _ = fmt.Fprintf(w, "Ready:\t%s\nReason:\t%s\nMessage:\t%s\n",
			termsafe.OneLine(string(ready.Status), 0), termsafe.OneLine(ready.Reason, 0), termsafe.OneLine(ready.Message, 0))
	} else {
		_, _ = fmt.Fprintf(w, "Ready:\tUnknown\nMessage:\tthe operator has not looked at the pipeline yet\n")
	}
	var notes []string
	if p.Spec.Suspend {
		notes = append(notes, "suspended (spec.suspend: true)")
	}
	if v, ok := p.Annotations[v1alpha1.RetryAnnotation]; ok {
		notes = append(notes, fmt.Sprintf("retry requested (%s=%q)", v1alpha1.RetryAnnotation, v))
	}
	if p.DeletionTimestamp != nil {
		notes = append(notes, "deleted, tearing down")
	}
	if p.Status.ObservedGeneration != p.Generation {
		notes = append(notes, fmt.Sprintf("status is of generation %d, spec is at %d", p.Status.ObservedGeneration, p.Generation))
	}
	if len(notes) > 0 {
		_, _ = fmt.Fprintf(w, "Note:\t%s\n", termsafe.OneLine(strings.Join(notes, "; "), 0))
	}
	_, _ = fmt.Fprintln(w)
}

// stepTable writes one row for each step of the spec, with what the status says of it.
// Every cell goes through termsafe.OneLine: a tab or a newline in one would break the table, and
// the cells come from the cluster.
func stepTable(w io.Writer, p *v1alpha1.Pipeline, now time.Time) {
	_, _ = fmt.Fprintln(w, "STEP\tEXECUTOR\tPHASE\tHOOK\tATTEMPTS\tDURATION\tMESSAGE")
	for _, row := range stepRows(p, now) {
		for i := range row {
			row[i] = termsafe.OneLine(row[i], 0)
		}
		_, _ = fmt.Fprintln(w, strings.Join(row, "\t"))
	}
}

// stepRows are the cells of the step table.
func stepRows(p *v1alpha1.Pipeline, now time.Time) [][]string {
	byName := map[string]*v1alpha1.StepStatus{}
	for i := range p.Status.Steps {
		byName[p.Status.Steps[i].Name] = &p.Status.Steps[i]
	}
	steps := p.StepsRun()
	rows := make([][]string, 0, len(steps))
	for _, step := range steps {
		s, ok := byName[step.Name]
		if !ok {
			rows = append(rows, []string{step.Name, step.Executor, string(v1alpha1.StepPending), "-", "0", "-", ""})
			continue
		}
		executor := s.Executor
		if executor == "" {
			executor = step.Executor
		}
		phase := string(s.Phase)
		if phase == "" {
			phase = string(v1alpha1.StepPending)
		}
		hook := string(s.Hook)
		if hook == "" {
			hook = "-"
		}
		rows = append(rows, []string{
			s.Name, executor, phase, hook, strconv.Itoa(int(s.Attempts)), stepDuration(s, now), termsafe.OneLine(stepMessage(s), maxMessage),
		})
	}
	return rows
}

// stepMessage is the step's message, after its reason when it failed: the pipeline's
// reason says only that a step failed (StepFailed), the step's says why (TicketRejected),
// and it comes first so that cutting a long message keeps it.
func stepMessage(s *v1alpha1.StepStatus) string {
	if s.Phase != v1alpha1.StepFailed {
		return s.Message
	}
	reason := s.Reason
	if ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); reason == "" && ready != nil {
		reason = ready.Reason // recorded by an operator older than StepStatus.Reason
	}
	switch {
	case reason == "":
		return s.Message
	case s.Message == "":
		return reason
	default:
		return reason + ": " + s.Message
	}
}

// stepDuration is how long the step ran: until it completed, until it failed, or until
// now while it runs.
func stepDuration(s *v1alpha1.StepStatus, now time.Time) string {
	if s.StartTime == nil {
		return "-"
	}
	end := now
	switch {
	case s.CompletionTime != nil:
		end = s.CompletionTime.Time
	case s.Phase == v1alpha1.StepFailed:
		ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		if ready == nil {
			return "-"
		}
		end = ready.LastTransitionTime.Time
	}
	d := end.Sub(s.StartTime.Time)
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

// approvalSummary writes where a step's approval is, after a blank line: waiting (for how
// many people, since when, until when) or approved, the request Approvals name, and how
// many decisions it saw.
func approvalSummary(w io.Writer, s *v1alpha1.StepStatus) {
	a := s.Approval
	counted, approvals := 0, 0
	for _, d := range a.Decisions {
		if d.Counted {
			counted++
			if d.Decision == v1alpha1.ApprovalApprove {
				approvals++
			}
		}
	}
	var state string
	switch {
	case a.ApprovedTime != nil:
		state = fmt.Sprintf("approved at %s (%d approval(s) required, waited since %s)", rfc3339(a.ApprovedTime), a.Required, rfc3339(&a.Since))
	case s.Phase == v1alpha1.StepAwaitingApproval:
		state = fmt.Sprintf("waiting for %d approval(s) since %s", a.Required, rfc3339(&a.Since))
	default:
		state = fmt.Sprintf("not approved: waited for %d approval(s) since %s", a.Required, rfc3339(&a.Since))
	}
	if a.Deadline != nil && a.ApprovedTime == nil {
		state += " (deadline " + rfc3339(a.Deadline) + ")"
	}
	if s.Phase == v1alpha1.StepAwaitingApproval && a.ApprovedTime == nil && approvals > 0 {
		state += fmt.Sprintf(", %d so far", approvals)
	}
	_, _ = fmt.Fprintf(w, "\nApproval:\tstep %s\n", termsafe.OneLine(s.Name, 0))
	_, _ = fmt.Fprintf(w, "State:\t%s\n", termsafe.OneLine(state, 0))
	_, _ = fmt.Fprintf(w, "Request:\t%s\n", termsafe.OneLine(a.Request, 0))
	if len(a.Decisions) == 0 {
		_, _ = fmt.Fprintf(w, "Decisions:\tnone yet\n")
	} else {
		_, _ = fmt.Fprintf(w, "Decisions:\t%d, %d counted\n", len(a.Decisions), counted)
	}
}

// decisionTable writes the decisions on a step's approval, one row each: when, who, what,
// whether it counted or why not, and the comment. Every cell goes through termsafe.OneLine:
// users and comments are anyone's text.
func decisionTable(w io.Writer, a *v1alpha1.StepApproval) {
	if len(a.Decisions) == 0 {
		return
	}
	_, _ = fmt.Fprintln(w, "  TIME\tUSER\tDECISION\tCOUNTED\tCOMMENT")
	for _, d := range a.Decisions {
		counted := "counted"
		if !d.Counted {
			counted = strings.TrimSuffix("ignored: "+d.Ignored, ": ")
		}
		_, _ = fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", rfc3339(&d.Time), termsafe.OneLine(d.User, 0),
			termsafe.OneLine(string(d.Decision), 0), termsafe.OneLine(counted, maxMessage), termsafe.OneLine(d.Comment, maxMessage))
	}
}

// rfc3339 is t in UTC, to the second.
func rfc3339(t *metav1.Time) string { return t.UTC().Format(time.RFC3339) }
