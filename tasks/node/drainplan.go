package node

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// firsts is what may come before a pod's eviction: its replacement (surge, nil under
// replacement None) or its responders' hand-off (ask).
type firsts struct {
	surge *surger
	ask   *handoff
}

// planDrain is node.drain's plan: a row per pod kubectl's drain listed (seen), evicted,
// handed off or replaced first, or left as its rules sorted them (list, refusals), and a
// row per PodDisruptionBudget that guards a pod it would evict; what a may not name is
// counted in a row per action.
func planDrain(ctx context.Context, client kubernetes.Interface, a *audience, p drainParams, node *corev1.Node, first firsts, seen []corev1.Pod,
	list *drain.PodDeleteList, refusals map[string]string) (contract.Plan, error) {
	evictable := map[string]bool{}
	for _, pod := range list.Pods() {
		evictable[podKey(&pod)] = true
	}
	// The rules: what they leave is not evicted, what they wait for neither, and the rest
	// goes in their order.
	ruled := map[string]podFate{}
	for i := range seen {
		if pod := &seen[i]; evictable[podKey(pod)] {
			if f := fateOf(pod, node, p.rules); f.by != "" {
				ruled[podKey(pod)] = f
				if f.behavior != BehaviorDrain {
					delete(evictable, podKey(pod))
				}
			}
		}
	}
	notes := podMessages(strings.Split(list.Warnings(), "; "))
	for key, msg := range refusals {
		notes[key] = msg
	}

	sort.Slice(seen, func(i, j int) bool { return podKey(&seen[i]) < podKey(&seen[j]) })
	sort.SliceStable(seen, func(i, j int) bool { return ruled[podKey(&seen[i])].order < ruled[podKey(&seen[j])].order })
	var evict []*corev1.Pod
	for i := range seen {
		if pod := &seen[i]; evictable[podKey(pod)] && pod.DeletionTimestamp == nil {
			evict = append(evict, pod)
		}
	}
	var budgets budgetCheck
	if len(refusals) == 0 { // a drain kubectl refuses evicts nothing: no budget comes into it
		var err error
		if budgets, err = checkBudgets(ctx, client, a, evict); err != nil {
			return contract.Plan{}, err
		}
	}

	var plan contract.Plan
	var waiting, daemons, mirrors, others, replaced, handedOff int
	hidden := map[string]*unnamed{}
	for i := range seen {
		pod := &seen[i]
		key := podKey(pod)
		row := contract.PlanItem{Kind: "Pod", Name: key, Action: "skip", Note: notes[key]}
		switch {
		case evictable[key] && pod.DeletionTimestamp != nil:
			row.Action, row.Note = "wait", "being deleted already"
			waiting++
		case ruled[key].behavior == BehaviorSkip:
			row.Note = joinNotes(row.Note, "left by "+ruled[key].by)
			others++
		case ruled[key].behavior == BehaviorWaitCompleted:
			row.Action, row.Note = "wait", joinNotes(row.Note, "until it completes ("+ruled[key].by+")")
			waiting++
		case evictable[key]:
			row.Action = "evict"
			if f, ok := ruled[key]; ok && f.order != 0 {
				row.Note = fmt.Sprintf("order %d (%s)", f.order, f.by)
			}
			if note, asked, err := first.ask.wouldAsk(pod); err != nil || asked {
				if err != nil {
					return contract.Plan{}, err
				}
				row.Action, row.Note = "hand off first", joinNotes(row.Note, note)
				handedOff++
				break
			}
			by := budgets.blockers[key]
			note, surged, err := first.surge.wouldSurge(pod, seen, len(by) > 0)
			if err != nil {
				return contract.Plan{}, err
			}
			switch {
			case surged:
				row.Action, row.Note = "surge first", joinNotes(row.Note, note)
				replaced++
			case len(by) > 0:
				row.Note = joinNotes(joinNotes(row.Note, blockedNote(by, p, a)), note)
			}
		case refusals[key] != "": // its note says why; the summary counts it
		case isDaemonSetPod(pod):
			daemons++
		case isMirrorPod(pod):
			row.Note = "mirror pod: the kubelet runs it, not the API"
			mirrors++
		default:
			others++
		}
		if !a.pods(pod.Namespace) {
			if hidden[row.Action] == nil {
				hidden[row.Action] = &unnamed{}
			}
			hidden[row.Action].add(pod.Namespace)
			continue
		}
		plan.Details = append(plan.Details, row)
	}
	for _, action := range []string{"hand off first", "surge first", "evict", "wait", "skip"} {
		if u := hidden[action]; u != nil {
			plan.Details = append(plan.Details, unnamedRow("Pod", action, u.of("pod")))
		}
	}
	plan.Details = append(plan.Details, budgets.rows...)
	for _, text := range refusalTexts(refusals, a) {
		plan.Warnings = append(plan.Warnings, "the drain would fail: "+text)
	}
	plan.Warnings = append(plan.Warnings, budgets.warnings...)

	if len(refusals) > 0 {
		// It fails before any eviction, with no outputs.
		plan.Summary = fmt.Sprintf("drain of node %s would fail: %s refused", p.node, plural(len(refusals), "pod"))
		return plan, nil
	}
	var b strings.Builder
	if len(evict) > 0 {
		fmt.Fprintf(&b, "evict %s from node %s", plural(len(evict), "pod"), p.node)
	} else {
		fmt.Fprintf(&b, "no pod to evict from node %s", p.node)
	}
	if waiting > 0 {
		fmt.Fprintf(&b, ", wait for %d being deleted", waiting)
	}
	if stay := stayPhrase(daemons, mirrors, others); stay != "" {
		fmt.Fprintf(&b, " (%s)", stay)
	}
	if len(budgets.blockers) > 0 {
		fmt.Fprintf(&b, "; %d blocked by %s", len(budgets.blockers), budgetList(budgets.blocking, a))
	}
	if replaced > 0 {
		fmt.Fprintf(&b, "; %d replaced first (a Deployment scaled up until the replacement is available)", replaced)
	}
	if handedOff > 0 {
		fmt.Fprintf(&b, "; %d handed off first (their eviction responders asked through EvictionRequests)", handedOff)
	}
	plan.Summary = b.String()
	plan.Outputs = map[string]string{OutputPodsEvicted: strconv.Itoa(len(evict))}
	return plan, nil
}

// unnamedRow counts, in one row, the things of a kind that a plan may not name.
func unnamedRow(kind, action, count string) contract.PlanItem {
	return contract.PlanItem{Kind: kind, Name: "…", Action: action, Note: count + ", not named"}
}

// budgetRef is a PodDisruptionBudget.
type budgetRef struct{ namespace, name string }

func (r budgetRef) String() string { return r.namespace + "/" + r.name }

// budgetCheck is how the PodDisruptionBudgets of the pods a drain would evict meet it now.
type budgetCheck struct {
	rows     []contract.PlanItem
	warnings []string
	// blockers are, by pod, the budgets that would refuse its eviction now.
	blockers map[string][]budgetRef
	// blocking is every budget that blocks a pod, once each.
	blocking []budgetRef
}

// checkBudgets reads the PodDisruptionBudgets in the pods' namespaces and matches them
// to the pods as the Eviction API does, in the order the drain evicts them: a budget
// allowing N disruptions lets N of its pods go, and holds the others back until it allows
// more. The drain itself never reads budgets (the Eviction API applies them), so one the
// ServiceAccount may not read is a warning, not a failure. Rows and warnings name only
// what a may name, and count the rest.
func checkBudgets(ctx context.Context, client kubernetes.Interface, a *audience, pods []*corev1.Pod) (budgetCheck, error) {
	c := budgetCheck{blockers: map[string][]budgetRef{}}
	byNamespace := map[string][]*corev1.Pod{}
	var namespaces []string
	for _, pod := range pods {
		if _, ok := byNamespace[pod.Namespace]; !ok {
			namespaces = append(namespaces, pod.Namespace)
		}
		byNamespace[pod.Namespace] = append(byNamespace[pod.Namespace], pod)
	}
	sort.Strings(namespaces)
	var unread, held unnamed
	hidden := map[string]*unnamed{} // by action
	for _, ns := range namespaces {
		list, err := client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			if a.budgets(ns) {
				c.warnings = append(c.warnings, fmt.Sprintf("cannot read PodDisruptionBudgets in %s: %v", ns, err))
			} else {
				unread.add(ns)
			}
			continue
		}
		if err != nil {
			return budgetCheck{}, failure(a.budgets(ns), "list PodDisruptionBudgets in "+ns, "list PodDisruptionBudgets in another namespace", err)
		}
		budgets := list.Items
		sort.Slice(budgets, func(i, j int) bool { return budgets[i].Name < budgets[j].Name })
		guarded := make([][]*corev1.Pod, len(budgets))
		for _, pod := range byNamespace[ns] {
			matching := guarding(budgets, pod)
			switch {
			case len(matching) > 1:
				var refs []budgetRef
				var names []string
				for _, i := range matching {
					refs = append(refs, budgetRef{ns, budgets[i].Name})
					names = append(names, refs[len(refs)-1].String())
				}
				c.block(podKey(pod), refs...)
				if !a.pods(ns) {
					held.add(ns)
					continue
				}
				which := strings.Join(names, ", ")
				if !a.budgets(ns) {
					which = fmt.Sprintf("%d of them", len(refs))
				}
				c.warnings = append(c.warnings, fmt.Sprintf("pod %s: the Eviction API refuses a pod with more than one PodDisruptionBudget (%s)",
					podKey(pod), which))
			case len(matching) == 1 && takesDisruption(pod, &budgets[matching[0]]):
				guarded[matching[0]] = append(guarded[matching[0]], pod)
			}
		}
		for i := range budgets {
			if len(guarded[i]) == 0 {
				continue
			}
			ref := budgetRef{ns, budgets[i].Name}
			allowed := int(budgets[i].Status.DisruptionsAllowed)
			action := "allows " + strconv.Itoa(allowed)
			if len(guarded[i]) > allowed {
				action = "blocks"
			}
			if a.budgets(ns) {
				c.rows = append(c.rows, contract.PlanItem{Kind: "PodDisruptionBudget", Name: ref.String(), Action: action,
					Note: fmt.Sprintf("%d of its pods on this node; disruptionsAllowed %d", len(guarded[i]), allowed)})
			} else {
				action, _, _ = strings.Cut(action, " ") // "allows", without what a count cannot say
				if hidden[action] == nil {
					hidden[action] = &unnamed{}
				}
				hidden[action].add(ns)
			}
			for _, pod := range guarded[i][min(max(allowed, 0), len(guarded[i])):] {
				c.block(podKey(pod), ref)
				if !a.pods(ns) {
					held.add(ns)
					continue
				}
				budget := "its PodDisruptionBudget"
				if a.budgets(ns) {
					budget = "PodDisruptionBudget " + ref.String()
				}
				warning := fmt.Sprintf("pod %s: %s allows %s now", podKey(pod), budget, plural(allowed, "disruption"))
				if allowed > 0 {
					warning += ", taken by the pods evicted before it"
				}
				c.warnings = append(c.warnings, warning)
			}
		}
	}
	for _, action := range []string{"blocks", "allows"} {
		if u := hidden[action]; u != nil {
			c.rows = append(c.rows, unnamedRow("PodDisruptionBudget", action, u.of("PodDisruptionBudget")))
		}
	}
	if held.count > 0 {
		c.warnings = append(c.warnings, "PodDisruptionBudgets would hold back "+held.of("pod")+" now")
	}
	if n := len(unread.namespaces); n > 0 {
		c.warnings = append(c.warnings, fmt.Sprintf("cannot read the PodDisruptionBudgets of %s", otherNamespaces(n)))
	}
	return c, nil
}

func (c *budgetCheck) block(pod string, budgets ...budgetRef) {
	c.blockers[pod] = append(c.blockers[pod], budgets...)
	for _, b := range budgets {
		if !slices.Contains(c.blocking, b) {
			c.blocking = append(c.blocking, b)
		}
	}
}

// guarding returns the indices of the budgets that guard pod, as the Eviction API matches
// them: a budget whose selector is empty or does not parse guards nothing.
func guarding(budgets []policyv1.PodDisruptionBudget, pod *corev1.Pod) []int {
	var matching []int
	for i := range budgets {
		selector, err := metav1.LabelSelectorAsSelector(budgets[i].Spec.Selector)
		if err != nil || selector.Empty() || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		matching = append(matching, i)
	}
	return matching
}

// takesDisruption tells whether evicting pod takes one of budget's disruptions, as the
// Eviction API decides: a pod pending or finished goes without asking, and so does an
// unready one when the budget says AlwaysAllow, or, under IfHealthyBudget (the default),
// when the budget has the healthy pods it wants.
func takesDisruption(pod *corev1.Pod, budget *policyv1.PodDisruptionBudget) bool {
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	if podutils.IsPodReady(pod) {
		return true
	}
	if policy := budget.Spec.UnhealthyPodEvictionPolicy; policy != nil && *policy == policyv1.AlwaysAllow {
		return false
	}
	return budget.Status.DesiredHealthy <= 0 || budget.Status.CurrentHealthy < budget.Status.DesiredHealthy
}

// blockedNote says what holds a pod back now, and what the drain does if it still does at
// the timeout.
func blockedNote(budgets []budgetRef, p drainParams, a *audience) string {
	then := fmt.Sprintf("the step fails if still blocked after %s", p.timeout)
	if p.policy == PolicyForce {
		then = fmt.Sprintf("policy Force deletes it if still blocked after %s", p.timeout)
	}
	return fmt.Sprintf("blocked now by %s; %s", budgetList(budgets, a), then)
}

// budgetList names the budgets a may name, and counts the others.
func budgetList(budgets []budgetRef, a *audience) string {
	var names []string
	var hidden unnamed
	for _, b := range budgets {
		if a.budgets(b.namespace) {
			names = append(names, b.String())
		} else {
			hidden.add(b.namespace)
		}
	}
	switch {
	case hidden.count == 0:
		return budgetNames(names)
	case len(names) == 0:
		return hidden.of("PodDisruptionBudget")
	}
	return budgetNames(names) + " and " + hidden.of("PodDisruptionBudget")
}

func budgetNames(names []string) string {
	if len(names) == 1 {
		return "PodDisruptionBudget " + names[0]
	}
	return "PodDisruptionBudgets " + strings.Join(names, ", ")
}

// stayPhrase counts the pods the drain leaves on the node.
func stayPhrase(daemons, mirrors, others int) string {
	var parts []string
	for _, n := range []struct {
		count int
		noun  string
	}{{daemons, "DaemonSet pod"}, {mirrors, "mirror pod"}, {others, "other pod"}} {
		if n.count > 0 {
			parts = append(parts, plural(n.count, n.noun))
		}
	}
	switch {
	case len(parts) == 0:
		return ""
	case daemons+mirrors+others == 1:
		return parts[0] + " stays"
	}
	return strings.Join(parts, ", ") + " stay"
}

// podMessages maps each pod named in kubectl's drain messages, "WHAT: ns/a, ns/b", to
// WHAT. Pod names hold neither ": " nor ", ", so the last ": " ends WHAT.
func podMessages(messages []string) map[string]string {
	byPod := map[string]string{}
	for _, m := range messages {
		i := strings.LastIndex(m, ": ")
		if i < 0 {
			continue
		}
		for _, key := range strings.Split(m[i+2:], ", ") {
			byPod[key] = m[:i]
		}
	}
	return byPod
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

func isDaemonSetPod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "DaemonSet"
}

func isMirrorPod(pod *corev1.Pod) bool {
	_, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return mirror
}

// joinAnd joins two parts of a list: "a, b and c".
func joinAnd(a, b string) string {
	if a == "" {
		return b
	}
	return a + " and " + b
}

func joinNotes(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// podRecorder is a client that keeps the pods listed through it: kubectl's drain tells
// only of the pods it would evict, and a plan tells of those it leaves too.
type podRecorder struct {
	kubernetes.Interface
	pods []corev1.Pod
}

func (r *podRecorder) CoreV1() typedcorev1.CoreV1Interface {
	return recordingCoreV1{CoreV1Interface: r.Interface.CoreV1(), r: r}
}

type recordingCoreV1 struct {
	typedcorev1.CoreV1Interface
	r *podRecorder
}

func (c recordingCoreV1) Pods(namespace string) typedcorev1.PodInterface {
	return recordingPods{PodInterface: c.CoreV1Interface.Pods(namespace), r: c.r}
}

type recordingPods struct {
	typedcorev1.PodInterface
	r *podRecorder
}

func (p recordingPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	list, err := p.PodInterface.List(ctx, opts)
	if err == nil {
		p.r.pods = append(p.r.pods, list.Items...)
	}
	return list, err
}
