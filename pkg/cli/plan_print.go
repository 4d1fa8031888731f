package cli

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// PrintPlan writes a dry run's plan under title: a line on the whole, then a table of its
// steps, each followed by what it would touch (KIND NAME ACTION NOTE), its warnings (!) and
// its would-be outputs; then, when the plan failed, why.
func PrintPlan(w io.Writer, title string, p *v1alpha1.Pipeline) error {
	return printPlan(w, title, nil, p)
}

// printPlan is PrintPlan with lines of its own under the title. Every value from the cluster
// goes through termsafe.OneLine.
func printPlan(w io.Writer, title string, notes []string, p *v1alpha1.Pipeline) error {
	var b strings.Builder
	b.WriteString(termsafe.OneLine(title+": "+planOutcome(p), 0) + "\n")
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	steps := pipelineops.PlannedSteps(p)
	rows := [][]string{{"STEP", "EXECUTOR", "SUMMARY"}}
	for _, s := range steps {
		rows = append(rows, []string{s.Name, orDash(s.Executor), stepSummary(s.Status)})
	}
	head := tabLines(rows, "")
	b.WriteString(head[0] + "\n")
	for i, s := range steps {
		b.WriteString(head[i+1] + "\n")
		if s.Status == nil {
			continue
		}
		if plan := s.Status.Plan; plan != nil {
			if len(plan.Details) > 0 {
				rows := [][]string{{"KIND", "NAME", "ACTION", "NOTE"}}
				for _, d := range plan.Details {
					rows = append(rows, []string{orDash(d.Kind), orDash(d.Name), orDash(d.Action), d.Note})
				}
				for _, line := range tabLines(rows, "    ") {
					b.WriteString(line + "\n")
				}
			}
			for _, warning := range plan.Warnings {
				b.WriteString("    ! " + termsafe.OneLine(warning, 0) + "\n")
			}
		}
		if len(s.Status.Outputs) > 0 {
			outputs := make([]string, 0, len(s.Status.Outputs))
			for _, k := range slices.Sorted(maps.Keys(s.Status.Outputs)) {
				outputs = append(outputs, termsafe.OneLine(k, 0)+"="+termsafe.OneLine(s.Status.Outputs[k], 0))
			}
			b.WriteString("    outputs: " + strings.Join(outputs, ", ") + "\n")
		}
	}
	if p.Failed() {
		why := "the operator gave no reason"
		if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			why = termsafe.OneLine(ready.Reason, 0) + ": " + termsafe.OneLine(ready.Message, 0)
		}
		b.WriteString("Failed: " + why + "\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	return nil
}

// planOutcome says in a few words how a dry run ended.
func planOutcome(p *v1alpha1.Pipeline) string {
	switch {
	case p.Failed() && p.Status.CurrentStep != "":
		return "Failed at step " + p.Status.CurrentStep
	case p.Failed():
		return "Failed"
	case p.Status.Phase != v1alpha1.PipelinePlanned:
		return orDash(string(p.Status.Phase))
	}
	steps, warnings := 0, 0
	for _, s := range p.Status.Steps {
		if s.Phase == v1alpha1.StepPlanned {
			steps++
		}
		if s.Plan != nil {
			warnings += len(s.Plan.Warnings)
		}
	}
	return fmt.Sprintf("Planned, %s, %s", plural(steps, "step"), plural(warnings, "warning"))
}

// stepSummary is the SUMMARY cell of a step.
func stepSummary(s *v1alpha1.StepStatus) string {
	switch {
	case s == nil:
		return "(not planned)"
	case s.Phase == v1alpha1.StepFailed:
		return "FAILED: " + s.Message
	case s.Phase != v1alpha1.StepPlanned:
		return "(not planned)"
	case s.Plan != nil && s.Plan.Summary != "":
		return s.Plan.Summary
	}
	return orDash(s.Message)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// tabLines lays rows out in columns as kubectl's tables are, every cell through termsafe.OneLine, and
// returns the lines without trailing blanks, each after indent. Laid out apart, the step
// rows and each step's detail rows keep columns of their own.
func tabLines(rows [][]string, indent string) []string {
	var buf bytes.Buffer
	tw := printers.GetNewTabWriter(&buf)
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = termsafe.OneLine(c, 0)
		}
		_, _ = fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush() // writes to a bytes.Buffer, which does not fail
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	for i := range lines {
		lines[i] = indent + strings.TrimRight(lines[i], " ")
	}
	return lines
}
