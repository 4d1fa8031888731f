package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// applyPlan is a plan of k8s.apply in the making.
type applyPlan struct {
	details  []contract.PlanItem
	warnings []string
	// changed are the fields that the rows "change" name, of all objects.
	changed []string
	// namespaces are the Namespaces of the manifest planned so far: Create applies them
	// before the objects that follow, which a dry run cannot.
	namespaces map[string]bool
}

func (pl *applyPlan) add(ref ObjectRef, action, note string) {
	pl.details = append(pl.details, planItem(ref.Kind, ref.Namespace, ref.Name, action, note))
}

// apply plans one object of the manifest.
func (pl *applyPlan) apply(ctx context.Context, client dynamic.Interface, me owner, p plannedObject, previous []ObjectRef, force bool) error {
	if p.ref.Group == "" && p.ref.Kind == "Namespace" {
		// For the objects after it: Create applies in order.
		defer func() { pl.namespaces[p.ref.Name] = true }()
	}
	if p.unserved != nil {
		pl.add(p.ref, actionCreate, "its kind is not served now")
		pl.warnings = append(pl.warnings, failure(p.unserved)+" (now: an earlier step may install it)")
		return nil
	}
	resource := resourceFor(client, p.mapping, p.ref.Namespace)
	live, err := resource.Get(ctx, p.ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case apierrors.IsForbidden(err):
		pl.add(p.ref, actionApply, "cannot get it: Forbidden")
		pl.warnings = append(pl.warnings, failure(fmt.Errorf("get %s: %w", p.ref.describe(), err)))
		return nil
	case err != nil:
		return fmt.Errorf("read %s before applying it: %w", p.ref.describe(), err)
	}

	var takeover string
	if live != nil {
		holder, ok := me.mine(live, p.ref, previous)
		switch {
		case !ok && !force:
			// Create fails before it applies anything: no dry run.
			pl.add(p.ref, actionRefuse, "not this step's: "+holder.String())
			pl.warnings = append(pl.warnings, failure(errNotOwned(p.ref, holder)))
			return nil
		case !ok:
			takeover = fmt.Sprintf("takes it over (%s)", holder)
		}
	}

	opts := applyOptions(force)
	opts.DryRun = []string{metav1.DryRunAll}
	after, err := resource.Apply(ctx, p.ref.Name, p.obj, opts)
	if err != nil {
		return pl.applyFailed(p.ref, live != nil, takeover, err)
	}
	if live == nil {
		pl.add(p.ref, actionCreate, takeover)
		return nil
	}
	paths := changedPaths(live.Object, after.Object)
	if len(paths) == 0 {
		pl.add(p.ref, actionUnchanged, takeover)
		return nil
	}
	pl.changed = append(pl.changed, paths...)
	pl.add(p.ref, actionChange, joinNotes(takeover, listPaths(paths, maxPaths)))
	return nil
}

// applyFailed plans an object whose dry-run apply failed with err: a row and a warning
// when Create would fail (or be held up) the same way, else an error.
func (pl *applyPlan) applyFailed(ref ObjectRef, exists bool, note string, err error) error {
	action := actionCreate
	if exists {
		action = actionApply
	}
	switch {
	case !exists && pl.namespaces[ref.Namespace] && isNamespaceNotFound(err, ref.Namespace):
		// Create applies the Namespace first; the dry run of it created nothing.
		pl.add(ref, actionCreate, joinNotes(note, "in namespace "+ref.Namespace+", which the manifest creates before: not checked"))
		return nil
	case isNamespaceNotFound(err, ref.Namespace):
		pl.add(ref, action, joinNotes(note, "namespace "+ref.Namespace+" does not exist now"))
		pl.warnings = append(pl.warnings, failure(fmt.Errorf("apply %s: %w", ref.describe(), err))+" (now: an earlier step may create it)")
		return nil
	case apierrors.IsForbidden(err):
		pl.add(ref, action, joinNotes(note, "cannot apply it: Forbidden"))
		pl.warnings = append(pl.warnings, failure(fmt.Errorf("apply %s: %w", ref.describe(), err)))
		return nil
	}
	if failed := applyError(ref, err); contract.IsPermanent(failed) {
		pl.add(ref, action, joinNotes(note, "would fail: "+executor.ReasonFor(failed)))
		pl.warnings = append(pl.warnings, failure(failed))
		return nil
	}
	return fmt.Errorf("dry-run apply %s: %w", ref.describe(), err)
}

// isNamespaceNotFound tells whether err says that the namespace ns does not exist, as the
// API server's admission does for an object in a namespace that does not exist.
func isNamespaceNotFound(err error, ns string) bool {
	var status apierrors.APIStatus
	if ns == "" || !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Group == "" && d.Kind == "namespaces" && d.Name == ns
}

// prune plans what Create's prune would do with ref, an object of the last inventory
// that the manifest no longer has (see examine). One that is gone needs no row.
func (pl *applyPlan) prune(ctx context.Context, client dynamic.Interface, m *mapper, me owner, ref ObjectRef) error {
	e, err := examine(ctx, client, m, me, ref)
	switch {
	case apierrors.IsForbidden(err):
		pl.add(ref, actionDelete, "cannot get it: Forbidden")
		pl.warnings = append(pl.warnings, failure(fmt.Errorf("prune %s: %w", ref.describe(), err)))
	case err != nil:
		return fmt.Errorf("prune %s: %w", ref.describe(), err)
	case e.what == removalDue:
		pl.add(ref, actionDelete, "no longer in the manifest")
	case e.what == removalDeleting:
		pl.add(ref, actionDelete, "no longer in the manifest; being deleted already")
	case e.what == removalNotOurs:
		pl.add(ref, actionSkip, "no longer in the manifest, and not this step's: "+e.holder.String())
	}
	return nil
}

// summaryPaths bounds the fields a plan's summary names.
const summaryPaths = 3

// summary counts the rows by action, in the order Create acts, naming the fields that
// change: "create 2, change 1 (spec.replicas), unchanged 1".
func (pl *applyPlan) summary() string {
	count := map[string]int{}
	for _, d := range pl.details {
		count[d.Action]++
	}
	var parts []string
	for _, action := range []string{actionCreate, actionChange, actionUnchanged, actionApply, actionRefuse, actionDelete, actionSkip} {
		n := count[action]
		if n == 0 {
			continue
		}
		part := fmt.Sprintf("%s %d", action, n)
		if action == actionChange {
			paths := slices.Compact(slices.Sorted(slices.Values(pl.changed)))
			part += " (" + listPaths(paths, summaryPaths) + ")"
		}
		parts = append(parts, part)
	}
	summary := strings.Join(parts, ", ")
	if n := len(pl.warnings); n > 0 {
		summary += fmt.Sprintf("; %d %s", n, plural(n, "warning"))
	}
	return summary
}
