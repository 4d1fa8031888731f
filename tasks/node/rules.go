package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	listers "github.com/stepwise-dev/stepwise/pkg/generated/listers/stepwise/v1alpha1"
)

// Drain behaviours a rule gives the pods it selects (v1alpha1.DrainBehavior).
const (
	BehaviorDrain         = string(v1alpha1.DrainBehaviorDrain)
	BehaviorSkip          = string(v1alpha1.DrainBehaviorSkip)
	BehaviorWaitCompleted = string(v1alpha1.DrainBehaviorWaitCompleted)
)

// maxDrainRules bounds the rules of one step: each pod is matched against each.
const maxDrainRules = 32

// DrainRules are the cluster's DrainRules as the operator reads them (an informer's lister),
// and whether it has read them yet: a drain waits until it has.
type DrainRules struct {
	Lister listers.DrainRuleLister
	Synced cache.InformerSynced
}

// stepRule is one rule of node.drain's rules parameter: a DrainRule's spec with a name.
type stepRule struct {
	Name                   string `json:"name,omitempty"`
	v1alpha1.DrainRuleSpec `json:",inline"`
}

// drainRule is a rule ready to match pods: from the cluster's DrainRules or the step's.
type drainRule struct {
	name        string
	spec        v1alpha1.DrainRuleSpec
	pods, nodes labels.Selector
}

// parseDrainRules reads the rules parameter: a YAML list of rules.
func parseDrainRules(value string) ([]drainRule, error) {
	if value == "" {
		return nil, nil
	}
	var rules []stepRule
	if err := yaml.UnmarshalStrict([]byte(value), &rules); err != nil {
		return nil, invalidParam("rules", fmt.Errorf("is not a list of drain rules: %w", err))
	}
	if len(rules) > maxDrainRules {
		return nil, invalidParam("rules", fmt.Errorf("has %d rules, more than %d", len(rules), maxDrainRules))
	}
	out := make([]drainRule, 0, len(rules))
	for i, r := range rules {
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("rules[%d]", i)
		}
		rule, err := newDrainRule("drain rule "+name, r.DrainRuleSpec)
		if err != nil {
			return nil, invalidParam("rules", fmt.Errorf("rule %s: %w", name, err))
		}
		out = append(out, rule)
	}
	return out, nil
}

// clusterRules are the cluster's DrainRules, by name, or an error to wait on while the
// operator has not read them yet. A DrainRule that cannot be used (the schema admits
// what a selector's parser refuses) is said, not skipped.
func (r *DrainRules) clusterRules() ([]drainRule, error) {
	if r == nil {
		return nil, nil
	}
	if !r.Synced() {
		return nil, errRulesNotRead
	}
	objs, err := r.Lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list the cluster's DrainRules: %w", err)
	}
	slices.SortFunc(objs, func(a, b *v1alpha1.DrainRule) int { return strings.Compare(a.Name, b.Name) })
	out := make([]drainRule, 0, len(objs))
	for _, o := range objs {
		rule, err := newDrainRule("DrainRule "+o.Name, o.Spec)
		if err != nil {
			return nil, contract.Permanent("InvalidDrainRule", fmt.Errorf("DrainRule %s: %w", o.Name, err))
		}
		out = append(out, rule)
	}
	return out, nil
}

// errRulesNotRead: the operator has not read the cluster's DrainRules yet.
var errRulesNotRead = errors.New("the operator has not read the cluster's DrainRules yet " +
	"(its ServiceAccount needs list and watch on drainrules.stepwise.dev)")

func newDrainRule(name string, spec v1alpha1.DrainRuleSpec) (drainRule, error) {
	r := drainRule{name: name, spec: spec}
	if !slices.Contains([]v1alpha1.DrainBehavior{v1alpha1.DrainBehaviorDrain, v1alpha1.DrainBehaviorSkip, v1alpha1.DrainBehaviorWaitCompleted}, spec.Behavior) {
		return r, fmt.Errorf("behavior is %q, not Drain, Skip or WaitCompleted", spec.Behavior)
	}
	if spec.Order != 0 && spec.Behavior != v1alpha1.DrainBehaviorDrain {
		return r, errors.New("an order goes with behavior Drain only")
	}
	var err error
	if r.pods, err = selectorOf(spec.PodSelector.AsMeta()); err != nil {
		return r, fmt.Errorf("podSelector: %w", err)
	}
	if r.nodes, err = selectorOf(spec.NodeSelector.AsMeta()); err != nil {
		return r, fmt.Errorf("nodeSelector: %w", err)
	}
	return r, nil
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
		if len(r.spec.Namespaces) > 0 && !slices.Contains(r.spec.Namespaces, pod.Namespace) {
			continue
		}
		if !r.pods.Matches(labels.Set(pod.Labels)) || !r.nodes.Matches(labels.Set(node.Labels)) {
			continue
		}
		return podFate{behavior: string(r.spec.Behavior), order: r.spec.Order, by: r.name}
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
	case f.behavior == BehaviorWaitCompleted: // a completed one never gets here (byRules)
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
