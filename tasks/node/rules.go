package node

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Drain behaviours a rule gives the pods it selects.
const (
	// BehaviorDrain evicts the pods, in the rule's order: every pod of a lower order is
	// gone before one of a higher order is evicted.
	BehaviorDrain = "Drain"
	// BehaviorSkip leaves the pods on the node; the drain ends without them.
	BehaviorSkip = "Skip"
	// BehaviorWaitCompleted evicts nothing: the drain waits until the pods complete.
	BehaviorWaitCompleted = "WaitCompleted"
)

// maxDrainRules bounds the rules of one step: each pod is matched against each.
const maxDrainRules = 32

// drainRule is one rule of node.drain's rules parameter: which pods (by labels, namespace,
// and the labels of the node they are on) get which behaviour, and in which order.
type drainRule struct {
	Name         string                `json:"name,omitempty"`
	PodSelector  *metav1.LabelSelector `json:"podSelector,omitempty"`
	Namespaces   []string              `json:"namespaces,omitempty"`
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	Behavior     string                `json:"behavior"`
	Order        int32                 `json:"order,omitempty"`

	pods, nodes labels.Selector
}

// parseDrainRules reads the rules parameter: a YAML list of rules, the first that selects a
// pod deciding it.
func parseDrainRules(value string) ([]drainRule, error) {
	if value == "" {
		return nil, nil
	}
	var rules []drainRule
	if err := yaml.UnmarshalStrict([]byte(value), &rules); err != nil {
		return nil, invalidParam("rules", fmt.Errorf("is not a list of drain rules: %w", err))
	}
	if len(rules) > maxDrainRules {
		return nil, invalidParam("rules", fmt.Errorf("has %d rules, more than %d", len(rules), maxDrainRules))
	}
	for i := range rules {
		r := &rules[i]
		if r.Name == "" {
			r.Name = fmt.Sprintf("rules[%d]", i)
		}
		if !slices.Contains([]string{BehaviorDrain, BehaviorSkip, BehaviorWaitCompleted}, r.Behavior) {
			return nil, invalidParam("rules", fmt.Errorf("rule %s: behavior is %q, not Drain, Skip or WaitCompleted", r.Name, r.Behavior))
		}
		if r.Order != 0 && r.Behavior != BehaviorDrain {
			return nil, invalidParam("rules", fmt.Errorf("rule %s: an order goes with behavior Drain only", r.Name))
		}
		var err error
		if r.pods, err = selectorOf(r.PodSelector); err != nil {
			return nil, invalidParam("rules", fmt.Errorf("rule %s: podSelector: %w", r.Name, err))
		}
		if r.nodes, err = selectorOf(r.NodeSelector); err != nil {
			return nil, invalidParam("rules", fmt.Errorf("rule %s: nodeSelector: %w", r.Name, err))
		}
	}
	return rules, nil
}

// selectorOf is s as a selector; no selector selects everything.
func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// podFate is what the drain does with one pod: its behaviour, its order, and what decided
// it (a rule's name, or the skip label), for the message and the plan.
type podFate struct {
	behavior string
	order    int32
	by       string
}

// fateOf decides pod's fate on node: the skip label first, then the first rule that selects
// it, else drained at order 0.
func fateOf(pod *corev1.Pod, node *corev1.Node, rules []drainRule) podFate {
	if pod.Labels[v1alpha1.DrainLabel] == v1alpha1.DrainSkip {
		return podFate{behavior: BehaviorSkip, by: "label " + v1alpha1.DrainLabel + "=" + v1alpha1.DrainSkip}
	}
	for _, r := range rules {
		if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, pod.Namespace) {
			continue
		}
		if !r.pods.Matches(labels.Set(pod.Labels)) || !r.nodes.Matches(labels.Set(node.Labels)) {
			continue
		}
		return podFate{behavior: r.Behavior, order: r.Order, by: "drain rule " + r.Name}
	}
	return podFate{behavior: BehaviorDrain}
}

// orderNow is the lowest order among the pods to drain that are still on the node (going
// ones included: a higher order waits until they are gone), or false when none is left.
func orderNow(pods []corev1.Pod, fates map[string]podFate) (int32, bool) {
	var lowest int32
	found := false
	for i := range pods {
		f := fates[podKey(&pods[i])]
		if f.behavior != BehaviorDrain {
			continue
		}
		if !found || f.order < lowest {
			lowest, found = f.order, true
		}
	}
	return lowest, found
}

// holdOf says why a pod of fate f is not evicted now, with order the order being drained,
// or "" when it is.
func holdOf(f podFate, order int32) string {
	switch {
	case f.behavior == BehaviorWaitCompleted:
		// A pod that completed is not left: fates of completed pods are dropped before.
		return "waits for it to complete (" + f.by + ")"
	case f.behavior == BehaviorDrain && f.order > order:
		return fmt.Sprintf("evicted after the pods of order %d (%s, order %d)", order, f.by, f.order)
	}
	return ""
}

// byRules sorts the pods kubectl's drain would delete by their fate on node: it returns
// those the drain still has to see go (to evict, or to wait for), their fates, and a note
// counting those it leaves (skipped, or completed under WaitCompleted).
func byRules(pods []corev1.Pod, node *corev1.Node, rules []drainRule) ([]corev1.Pod, map[string]podFate, string) {
	fates := make(map[string]podFate, len(pods))
	left := pods[:0:0]
	kept := 0
	for i := range pods {
		pod := &pods[i]
		f := fateOf(pod, node, rules)
		completed := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if f.behavior == BehaviorSkip || (f.behavior == BehaviorWaitCompleted && completed) {
			kept++
			continue
		}
		fates[podKey(pod)] = f
		left = append(left, *pod)
	}
	if kept == 0 {
		return left, fates, ""
	}
	return left, fates, fmt.Sprintf("%s left on the node by the drain's rules", plural(kept, "pod"))
}
