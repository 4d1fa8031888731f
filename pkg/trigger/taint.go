package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// waitingEffect is the effect of the trigger's taint, typed.
const waitingEffect = corev1.TaintEffect(v1alpha1.TaintWaitingEffect)

// taintsNodes tells whether the trigger watches Nodes, the only kind it may taint.
func (ts *triggerSync) taintsNodes() bool {
	return ts.target.gvr == corev1.SchemeGroupVersion.WithResource("nodes")
}

// syncTaints puts the trigger's taint on the nodes that wait in its queue, and takes it off
// every other node, acting as the trigger's ServiceAccount. Without spec.taintWaiting no
// node should have it: those of an earlier spec are removed, then the finalizer.
func (ts *triggerSync) syncTaints(ctx context.Context) error {
	if !ts.taintsNodes() {
		return nil
	}
	want := map[types.UID]bool{}
	if ts.trig.Spec.TaintWaiting {
		if err := ts.ensureFinalizer(ctx); err != nil {
			return err
		}
		for _, obj := range ts.waiting {
			want[obj.GetUID()] = true
		}
	}
	nodes := make([]*unstructured.Unstructured, 0, len(ts.present))
	for _, obj := range ts.present {
		nodes = append(nodes, obj)
	}
	left, err := ts.setTaints(ctx, nodes, want)
	if err != nil || ts.trig.Spec.TaintWaiting || left > 0 {
		return err
	}
	return ts.removeFinalizer(ctx)
}

// setTaints makes each node carry the trigger's taint when want says so, and not
// otherwise. It returns how many of our taints are left on nodes that should not have
// them. A node it may not patch (Forbidden, or gone) is reported in ts.taintErr, once, and
// skipped; a conflict (the cache is behind) is an error, so the sync runs again.
func (ts *triggerSync) setTaints(ctx context.Context, nodes []*unstructured.Unstructured, want map[types.UID]bool) (int, error) {
	value := rules.TaintValueOf(ts.trig)
	left := 0
	for _, node := range nodes {
		taints, err := taintsOf(node)
		if err != nil {
			return left, err
		}
		i := slices.IndexFunc(taints, func(t corev1.Taint) bool {
			return t.Key == v1alpha1.TaintWaiting && t.Effect == waitingEffect
		})
		has := i >= 0 && taints[i].Value == value
		switch {
		case want[node.GetUID()] && i < 0:
			taints = append(taints, corev1.Taint{Key: v1alpha1.TaintWaiting, Value: value, Effect: waitingEffect})
		case !want[node.GetUID()] && has:
			taints = slices.Delete(taints, i, i+1)
		default:
			continue // as it should be, or another trigger's taint
		}
		err = ts.patchTaints(ctx, node, taints)
		switch {
		case err == nil:
		case apierrors.IsConflict(err):
			return left, err
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			if has {
				left++
			}
			if ts.taintErr == nil {
				ts.taintErr = err
				ts.event(corev1.EventTypeWarning, v1alpha1.TriggerReasonTaintFailed, "%v", err)
			}
		default:
			return left, err
		}
	}
	return left, nil
}

// taintsOf reads a node's spec.taints from the cache's object.
func taintsOf(node *unstructured.Unstructured) ([]corev1.Taint, error) {
	raw, found, err := unstructured.NestedSlice(node.Object, "spec", "taints")
	if err != nil || !found {
		return nil, err
	}
	var spec struct {
		Taints []corev1.Taint `json:"taints"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"taints": raw}, &spec); err != nil {
		return nil, fmt.Errorf("read the taints of node %s: %w", node.GetName(), err)
	}
	return spec.Taints, nil
}

// patchTaints writes a node's taints as the trigger's ServiceAccount, on condition that
// the node is still as the cache saw it (its resourceVersion).
func (ts *triggerSync) patchTaints(ctx context.Context, node *unstructured.Unstructured, taints []corev1.Taint) error {
	sa := serviceAccountOf(ts.trig)
	clients, err := ts.c.clients.ForServiceAccount(sa.Namespace, sa.Name)
	if err != nil {
		return fmt.Errorf("clients of ServiceAccount %s: %w", sa, err)
	}
	if taints == nil {
		taints = []corev1.Taint{} // a merge patch with null would leave them
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.GetResourceVersion()},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return fmt.Errorf("encode the taints of node %s: %w", node.GetName(), err)
	}
	if _, err := clients.Kube.CoreV1().Nodes().Patch(ctx, node.GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName}); err != nil {
		return fmt.Errorf("taint node %s as ServiceAccount %s: %w", node.GetName(), sa, err)
	}
	klog.FromContext(ctx).V(2).Info("Set the taints of a waiting node", "node", node.GetName(), "taints", len(taints))
	return nil
}

// finalizeTaints removes the taints of a trigger being deleted from every node, then its
// finalizer. A node it may not patch keeps the taint (a Warning Event names it): the
// trigger's deletion is not held by what its ServiceAccount may no longer do.
func (c *Controller) finalizeTaints(ctx context.Context, key cache.ObjectName, trig *v1alpha1.PipelineTrigger) (time.Duration, error) {
	ts := &triggerSync{c: c, key: key, trig: trig, mem: c.memoryOf(key)}
	t, prob := c.resources.resolve(trig.Spec.Resource)
	if prob == nil {
		ts.target = t
		lister, synced, err := c.objects.Watch(key, t.kind(), nil) // taints and metadata: kept of every Node
		if err != nil {
			return 0, err
		}
		if !synced {
			return cacheSyncRetry, nil
		}
		list, err := lister.List(labels.Everything())
		if err != nil {
			return 0, fmt.Errorf("list nodes from cache: %w", err)
		}
		var nodes []*unstructured.Unstructured
		for _, item := range list {
			if obj, ok := item.(*unstructured.Unstructured); ok {
				nodes = append(nodes, obj)
			}
		}
		if ts.taintsNodes() {
			if _, err := ts.setTaints(ctx, nodes, nil); err != nil {
				return 0, err
			}
		}
	}
	if err := ts.removeFinalizer(ctx); err != nil {
		return 0, err
	}
	c.forget(key)
	return 0, nil
}

// ensureFinalizer adds v1alpha1.FinalizerTaints to the trigger if it has not got it.
func (ts *triggerSync) ensureFinalizer(ctx context.Context) error {
	if slices.Contains(ts.trig.Finalizers, v1alpha1.FinalizerTaints) {
		return nil
	}
	return ts.patchFinalizers(ctx, append(slices.Clone(ts.trig.Finalizers), v1alpha1.FinalizerTaints))
}

// removeFinalizer removes v1alpha1.FinalizerTaints from the trigger if it has it.
func (ts *triggerSync) removeFinalizer(ctx context.Context) error {
	if !slices.Contains(ts.trig.Finalizers, v1alpha1.FinalizerTaints) {
		return nil
	}
	return ts.patchFinalizers(ctx, slices.DeleteFunc(slices.Clone(ts.trig.Finalizers), func(f string) bool { return f == v1alpha1.FinalizerTaints }))
}

// patchFinalizers writes the trigger's finalizers, on condition that it is as the cache saw
// it; the sync goes on with what the API server returned (the status write needs its
// resourceVersion), and so does the next one.
func (ts *triggerSync) patchFinalizers(ctx context.Context, finalizers []string) error {
	trig := ts.trig
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": trig.ResourceVersion, "finalizers": finalizers,
	}})
	if err != nil {
		return fmt.Errorf("encode the finalizers of trigger %s/%s: %w", trig.Namespace, trig.Name, err)
	}
	got, err := ts.c.client.StepwiseV1alpha1().PipelineTriggers(trig.Namespace).Patch(ctx, trig.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set the finalizers of trigger %s/%s: %w", trig.Namespace, trig.Name, err)
	}
	ts.c.triggers.Mutation(got)
	ts.trig = got
	return nil
}
