package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
)

func newWhyCommand(o *options) *cobra.Command {
	return o.named(&cobra.Command{
		Use:   "why NAME",
		Short: "Say what holds a pipeline or a trigger back, since when and what would let it go on",
		Long: `Say what holds the pipeline or PipelineTrigger NAME back, in one screen: each blocker
(a PodDisruptionBudget refusing a drain, an approval, a failed step, a blocked teardown, a
closed gate, a spent failure budget, a full NodeBudget, the maintenance window, the
trigger's concurrency), the object, since when, and what would let it go on. It reads the
status.blockedBy the operator writes; nothing is guessed from messages.

When a pipeline and a trigger share the name, both are told. Exit code 0 either way.`,
		Example: `  kubectl stepwise why retire-node-3 -n ops
  kubectl stepwise why retire -n ops          # a PipelineTrigger`,
	}, pipelineNames, func(ctx context.Context, ns string, c *Clients, name string) error {
		found := false
		p, err := c.Stepwise.StepwiseV1alpha1().Pipelines(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			found = true
			withBudgetState(ctx, c, p.Status.BlockedBy)
			writeWhyPipeline(o.streams.Out, p, time.Now())
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("get pipeline %s/%s: %w", ns, name, err)
		}
		trig, err := c.Stepwise.StepwiseV1alpha1().PipelineTriggers(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			if found {
				_, _ = fmt.Fprintln(o.streams.Out)
			}
			found = true
			withBudgetState(ctx, c, trig.Status.BlockedBy)
			writeWhyTrigger(o.streams.Out, trig, time.Now())
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("get trigger %s/%s: %w", ns, name, err)
		}
		if !found {
			return fmt.Errorf("no pipeline or trigger %s in namespace %s", name, ns)
		}
		return nil
	})
}

// withBudgetState adds to each PodDisruptionBudget blocker how the budget stands now, read
// with the user's own rights (nothing when they may not read it).
func withBudgetState(ctx context.Context, c *Clients, blockers []v1alpha1.Blocker) {
	for i := range blockers {
		b := &blockers[i]
		if b.Kind != v1alpha1.KindPodDisruptionBudget || c.Kube == nil {
			continue
		}
		pdb, err := c.Kube.PolicyV1().PodDisruptionBudgets(b.Namespace).Get(ctx, b.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		b.Unblock += fmt.Sprintf("; now %d disruption(s) allowed, %d of %d pods healthy, %d needed",
			pdb.Status.DisruptionsAllowed, pdb.Status.CurrentHealthy, pdb.Status.ExpectedPods, pdb.Status.DesiredHealthy)
	}
}

func writeWhyPipeline(w io.Writer, p *v1alpha1.Pipeline, now time.Time) {
	ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	state := string(p.Status.Phase)
	if ready != nil {
		state += ", " + ready.Reason
	}
	_, _ = fmt.Fprintf(w, "Pipeline %s/%s: %s\n", termsafe.OneLine(p.Namespace, 0), termsafe.OneLine(p.Name, 0), termsafe.OneLine(state, 0))
	writeBlockers(w, p.Status.BlockedBy, true, now, "nothing holds it back")
}

func writeWhyTrigger(w io.Writer, t *v1alpha1.PipelineTrigger, now time.Time) {
	ready := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady)
	state := fmt.Sprintf("%d running, %d waiting", t.Status.Running, t.Status.Waiting)
	if ready != nil {
		state = ready.Reason + ", " + state
	}
	_, _ = fmt.Fprintf(w, "PipelineTrigger %s/%s: %s\n", termsafe.OneLine(t.Namespace, 0), termsafe.OneLine(t.Name, 0), termsafe.OneLine(state, 0))
	writeBlockers(w, t.Status.BlockedBy, false, now, "nothing keeps it from starting pipelines")
}

// writeBlockers writes one row per blocker: what, which object (and step), since when,
// and what would let it go on.
func writeBlockers(w io.Writer, blockers []v1alpha1.Blocker, steps bool, now time.Time, none string) {
	if len(blockers) == 0 {
		_, _ = fmt.Fprintf(w, "  %s\n", none)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "  BLOCKED BY\tOBJECT\tSINCE\tUNBLOCKED WHEN"
	if steps {
		header = "  BLOCKED BY\tSTEP\tOBJECT\tSINCE\tUNBLOCKED WHEN"
	}
	_, _ = fmt.Fprintln(tw, header)
	for _, b := range blockers {
		object := "-"
		switch {
		case b.Namespace != "" && b.Name != "":
			object = b.Namespace + "/" + b.Name
		case b.Name != "":
			object = b.Name
		}
		since := "-"
		if b.Since != nil {
			since = duration.HumanDuration(now.Sub(b.Since.Time)) + " ago"
		}
		cells := []string{b.Kind, object, since, b.Unblock}
		if steps {
			step := b.Step
			if step == "" {
				step = "-"
			}
			cells = []string{b.Kind, step, object, since, b.Unblock}
		}
		for i, c := range cells {
			cells[i] = termsafe.OneLine(c, 0)
		}
		_, _ = fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
}
