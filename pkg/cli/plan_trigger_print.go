package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
)

// listedNames bounds the object names a line of plan --trigger lists.
const listedNames = 10

// printTriggerPlan writes what the trigger would start, then each planned object's plan.
func (po *planOptions) printTriggerPlan(q *triggerQueue, planned []waitingObject, results []*v1alpha1.Pipeline) error {
	var b strings.Builder
	trig := q.trig
	_, _ = fmt.Fprintf(&b, "Trigger %s/%s: %s %s objects, template %s, concurrency %d, %s unfinished\n",
		termsafe.OneLine(trig.Namespace, 0), termsafe.OneLine(trig.Name, 0), termsafe.OneLine(trig.Spec.Resource.APIVersion, 0), termsafe.OneLine(trig.Spec.Resource.Kind, 0),
		termsafe.OneLine(trig.Spec.TemplateRef.Name, 0), q.concurrency(), plural(q.unfinished, "pipeline"))
	if len(q.started) > 0 {
		b.WriteString("Started already: " + nameList(q.started) + "\n")
	}
	startable := q.startable()
	free := min(q.free(), len(startable))
	switch {
	case len(startable) == 0:
		b.WriteString("Waiting: none\n")
	case q.blocked != "":
		_, _ = fmt.Fprintf(&b, "Waiting: %s; none would start now: %s\n", plural(len(startable), "object"), termsafe.OneLine(q.blocked, 0))
	default:
		_, _ = fmt.Fprintf(&b, "Waiting: %s, in the order they would start; %d would start now\n", plural(len(startable), "object"), free)
	}
	if _, err := fmt.Fprint(po.streams.Out, b.String()); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	for i, w := range planned {
		when := "would start now"
		if i >= free {
			when = "would wait"
		}
		if _, err := fmt.Fprintln(po.streams.Out); err != nil {
			return fmt.Errorf("write the plan: %w", err)
		}
		title := fmt.Sprintf("%d. %s (%s)", i+1, w.name, when)
		if err := printPlan(po.streams.Out, title, []string{"Params: " + paramList(w.params)}, results[i]); err != nil {
			return err
		}
	}
	b.Reset()
	if more := startable[len(planned):]; len(more) > 0 {
		names := make([]string, len(more))
		for i, w := range more {
			names[i] = w.name
		}
		_, _ = fmt.Fprintf(&b, "\n%d more would wait, not planned (--max %d): %s\n", len(more), po.max, nameList(names))
	}
	for _, w := range q.waiting {
		if w.err != nil {
			_, _ = fmt.Fprintf(&b, "! %s waits, its params do not resolve: %s\n", termsafe.OneLine(w.name, 0), termsafe.OneLine(w.err.Error(), 0))
		}
	}
	if _, err := fmt.Fprint(po.streams.Out, b.String()); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	return nil
}

// nameList lists the first names, through termsafe.OneLine, and says how many more there are.
func nameList(names []string) string {
	out := make([]string, 0, min(len(names), listedNames))
	for _, n := range names[:min(len(names), listedNames)] {
		out = append(out, termsafe.OneLine(n, 0))
	}
	s := strings.Join(out, ", ")
	if len(names) > listedNames {
		s += fmt.Sprintf(" and %d more", len(names)-listedNames)
	}
	return s
}

// paramList is NAME=VALUE, ..., by name, every value through termsafe.OneLine.
func paramList(params map[string]string) string {
	if len(params) == 0 {
		return "none"
	}
	out := make([]string, 0, len(params))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		out = append(out, termsafe.OneLine(k, 0)+"="+termsafe.OneLine(params[k], 0))
	}
	return strings.Join(out, ", ")
}
