package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// OutputPodsEvicted is the output of node.drain that counts the pods it evicted (or, past
// the timeout under policy Force, deleted).
const OutputPodsEvicted = "podsEvicted"

// Drain policies: what happens when the drain's timeout passes with pods left.
const (
	PolicyFail  = "Fail"  // the step fails, saying which pods are left and why
	PolicyForce = "Force" // the pods left are deleted, ignoring PodDisruptionBudgets
)

// defaultHandoffTimeout is how long a pod's eviction responders have to hand off, by
// default: long enough for a controller to bring a replacement up, short of the drain's
// own default timeout.
const defaultHandoffTimeout = 5 * time.Minute

// drainPoll is how often a drain looks at the pods left.
const drainPoll = 5 * time.Second

// evictionVersion is policy/v1, served by every supported Kubernetes version; asking
// discovery on every call would cost a request for nothing.
var evictionVersion = schema.GroupVersion{Group: "policy", Version: "v1"}

// Drain is node.drain: it evicts the node's pods with the Eviction API, so that
// PodDisruptionBudgets are honoured, using kubectl's drain library. DaemonSet pods are
// left alone. Each call evicts what it can and returns; until the node is empty the message
// says how many pods are left and which budget blocks which pod, naming those of another
// namespace only where the pipeline's ServiceAccount may read them (see audience). The
// timeout runs from the hook's first call (the request's HookStarted). Parameters: see
// Describe. Output: podsEvicted.
type Drain struct {
	executor.Base
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
	// Rules are the cluster's DrainRules; nil: none.
	Rules *DrainRules
}

func (Drain) Name() string { return "node.drain" }

type drainParams struct {
	node               string
	timeout            time.Duration
	policy             string
	replacement        string
	handoffTimeout     time.Duration
	podSelector        string
	gracePeriodSeconds int
	deleteEmptyDirData bool
	rules              []drainRule
}

// parseDrainParams reads the parameters, which the engine checked against Describe
// before the hook (types, the policy's values, defaults), and checks what their types do
// not say.
func parseDrainParams(req *executor.Request) (drainParams, error) {
	name, err := nodeName(req)
	if err != nil {
		return drainParams{}, err
	}
	p := drainParams{
		node:               name,
		timeout:            req.Duration("timeout"),
		policy:             req.String("policy"),
		replacement:        req.String("replacement"),
		handoffTimeout:     req.Duration("handoffTimeout"),
		podSelector:        req.String("podSelector"),
		gracePeriodSeconds: int(req.Int("gracePeriodSeconds")),
		deleteEmptyDirData: req.Bool("deleteEmptyDirData"),
	}
	if _, set := req.Params["gracePeriodSeconds"]; !set {
		// A grace period of 0 kills at once: a request without one (from a caller that
		// skipped the engine's defaults) gets the pod's own, as the declared default says.
		p.gracePeriodSeconds = -1
	}
	if p.replacement == "" {
		p.replacement = ReplacementSurge // as declared, for a caller that skipped the engine's defaults
	}
	if _, set := req.Params["handoffTimeout"]; !set {
		p.handoffTimeout = defaultHandoffTimeout // as declared, for a caller that skipped the engine's defaults
	}
	if p.timeout <= 0 {
		return p, invalidParam("timeout", fmt.Errorf("is %q, not a positive duration such as 10m", req.String("timeout")))
	}
	if p.handoffTimeout <= 0 {
		return p, invalidParam("handoffTimeout", fmt.Errorf("is %q, not a positive duration such as 5m", req.String("handoffTimeout")))
	}
	if _, err := labels.Parse(p.podSelector); err != nil {
		return p, invalidParam("podSelector", fmt.Errorf("is not a label selector: %w", err))
	}
	if p.rules, err = parseDrainRules(req.String("rules")); err != nil {
		return p, err
	}
	return p, nil
}

func (d Drain) now() time.Time {
	if d.Clock == nil {
		return time.Now()
	}
	return d.Clock.Now()
}

// begin reads what every call of the drain starts from: its client, parameters and node.
func (d Drain) begin(ctx context.Context, req *executor.Request) (kubernetes.Interface, drainParams, *corev1.Node, error) {
	client, err := kubeClient(req)
	if err != nil {
		return nil, drainParams{}, nil, err
	}
	p, err := parseDrainParams(req)
	if err != nil {
		return nil, p, nil, err
	}
	node, err := getNode(ctx, client, p.node)
	return client, p, node, err
}

func (d Drain) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, p, node, err := d.begin(ctx, req)
	if err != nil {
		return contract.Result{}, err
	}
	conditions := func(state drainState) (string, error) {
		state.message = fmt.Sprintf("pipeline %s/%s, step %s", req.Pipeline.Namespace, req.Pipeline.Name, req.Step)
		return setDrainConditions(ctx, client, node, state, metav1.NewTime(d.now()))
	}

	// The executor keeps no memory: the engine says when the drain's first call was made,
	// and hands back the step's outputs, with the count of pods evicted so far, on every
	// call. A request without a start (a caller other than the engine) starts now.
	started := req.HookStarted
	if started.IsZero() {
		started = d.now()
	}
	evicted, _ := strconv.Atoi(req.Outputs[req.Step][OutputPodsEvicted])
	outputs := func() map[string]string {
		return map[string]string{OutputPodsEvicted: strconv.Itoa(evicted)}
	}

	helper := p.helper(ctx, client)
	list, refusals, err := podsToDrain(helper, p.node)
	if err != nil {
		return contract.Result{}, err
	}
	a := newAudience(ctx, client, req)
	if len(refusals) > 0 {
		return contract.Result{}, contract.Permanent("DrainBlocked", fmt.Errorf("cannot drain node %q: %s",
			p.node, strings.Join(refusalTexts(refusals, a), "\n")))
	}
	var surge *surger
	if p.replacement == ReplacementSurge {
		surge = newSurger(ctx, client, req.Pipeline.UID, req.Created)
	}
	ask := newHandoff(ctx, client, p.handoffTimeout, d.now(), req.Created)
	rules, err := d.Rules.clusterRules()
	if errors.Is(err, errRulesNotRead) {
		if d.now().Sub(started) > p.timeout {
			return contract.Result{}, contract.Permanent("DrainTimeout", fmt.Errorf("node %q not drained within %s: %w", p.node, p.timeout, err))
		}
		return contract.Result{RequeueAfter: time.Second, Message: "waiting: " + err.Error(), Outputs: outputs()}, nil
	}
	if err != nil {
		return contract.Result{}, err
	}
	pods, fates, kept := byRules(list.Pods(), node, append(rules, p.rules...))
	if len(pods) == 0 {
		restored, err := undo(surge, ask)
		if err != nil {
			return contract.Result{}, err
		}
		note, err := conditions(drainState{drained: true, reason: ReasonDrainFinished})
		if err != nil {
			return contract.Result{}, err
		}
		return contract.Result{Done: true, Message: withNotes(fmt.Sprintf("node drained, %d pods evicted", evicted), append(restored, note, kept)), Outputs: outputs()}, nil
	}

	overdue := d.now().Sub(started) > p.timeout
	if overdue && p.policy == PolicyFail {
		// The drain ends here: what it scaled up goes back first, and what it asked for is
		// withdrawn; a failure to do either is retried before the step fails.
		restored, err := undo(surge, ask)
		if err != nil {
			return contract.Result{}, err
		}
		if _, err := conditions(drainState{reason: ReasonDrainFailed}); err != nil {
			return contract.Result{}, err
		}
		return contract.Result{}, contract.Permanent("DrainTimeout", fmt.Errorf("node %q not drained within %s: %s",
			p.node, p.timeout, withNotes(describeLeft(pods, nil, a), restored)))
	}

	note, err := conditions(drainState{inProgress: true, reason: ReasonDrainStarted})
	if err != nil {
		return contract.Result{}, err
	}
	blocked := map[string]string{}
	order, _ := orderNow(pods, fates)
	var blockers []contract.Blocker
	block := func(b contract.Blocker) {
		if !slices.Contains(blockers, b) {
			blockers = append(blockers, b)
		}
	}
	// holdForReplacement tells whether pod waits for its replacement (refused: its budget
	// refused its eviction), and records why.
	holdForReplacement := func(pod *corev1.Pod, refused bool) (bool, error) {
		h, err := surge.prepare(pod, pods, refused)
		switch {
		case err != nil:
			return false, failure(a.pods(pod.Namespace), "replace pod "+podKey(pod), "replace a pod in another namespace", err)
		case h == nil:
			return false, nil
		}
		blocked[podKey(pod)] = h.cause
		if h.blocker != nil && a.deployments(pod.Namespace) {
			block(*h.blocker)
		}
		return true, nil
	}
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil {
			continue // going away already
		}
		if overdue { // and the policy is Force
			if err := helper.DeletePod(*pod); err != nil && !apierrors.IsNotFound(err) {
				return contract.Result{}, failure(a.pods(pod.Namespace), "delete pod "+podKey(pod), "delete a pod in another namespace", err)
			}
			evicted++
			pod.DeletionTimestamp = &metav1.Time{Time: d.now()}
			continue
		}
		if why := holdOf(fates[podKey(pod)], order); why != "" {
			blocked[podKey(pod)] = why
			continue
		}
		if h, err := ask.ask(pod); err != nil || h != nil {
			if err != nil {
				return contract.Result{}, failure(a.pods(pod.Namespace), "ask for the eviction of pod "+podKey(pod), "ask for the eviction of a pod in another namespace", err)
			}
			blocked[podKey(pod)] = h.cause
			if h.blocker != nil && a.pods(pod.Namespace) {
				block(*h.blocker)
			}
			continue
		}
		if held, err := holdForReplacement(pod, false); err != nil || held {
			if err != nil {
				return contract.Result{}, err
			}
			continue
		}
		err := helper.EvictPod(*pod, evictionVersion)
		switch {
		case err == nil:
			evicted++
			pod.DeletionTimestamp = &metav1.Time{Time: d.now()}
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			if held, err := holdForReplacement(pod, true); err != nil || held {
				if err != nil {
					return contract.Result{}, err
				}
				continue
			}
			b, named := refusingBudget(pod.Namespace, err)
			if named && !a.budgets(pod.Namespace) {
				blocked[podKey(pod)] = ask.withWhy(pod, surge.withWhy(pod, "eviction refused by a PodDisruptionBudget"))
				continue
			}
			blocked[podKey(pod)] = ask.withWhy(pod, surge.withWhy(pod, disruptionCause(err)))
			if named {
				block(b)
			}
		default:
			return contract.Result{}, failure(a.pods(pod.Namespace), "evict pod "+podKey(pod), "evict a pod in another namespace", err)
		}
	}
	// What this call evicted is done: a Deployment that cannot be scaled back now (its
	// controller changed it in between) is said, and scaled back at the next call.
	restored, err := surge.restoreDone(pods)
	if err != nil {
		restored = append(restored, "scaling back at the next call: "+err.Error())
	}
	res := contract.Result{RequeueAfter: drainPoll, Message: withNotes(describeLeft(pods, blocked, a), append(restored, note, kept)), Outputs: outputs(),
		Created: mergeCreated(surge.created(), ask.created())}
	return res.Blocked(blockers...), nil
}

// Delete scales back what the drain scaled up and has not scaled back yet (a drain torn
// down while it waited on a replacement), and clears the drain conditions it set on a Node
// that is still there; the pods it evicted stay evicted.
func (d Drain) Delete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, err := kubeClient(req)
	if err != nil {
		return contract.Result{}, err
	}
	var surge *surger
	if req.Created[createdSurged] != "" {
		surge = newSurger(ctx, client, req.Pipeline.UID, req.Created)
	}
	var ask *handoff
	if req.Created[createdEvictionRequests] != "" {
		ask = newHandoff(ctx, client, 0, d.now(), req.Created)
	}
	notes, err := undo(surge, ask)
	if err != nil {
		return contract.Result{}, err
	}
	name, err := nodeName(req)
	if err != nil {
		return contract.Result{}, err
	}
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return contract.Result{}, fmt.Errorf("get node %q: %w", name, err)
	case drainedByStepwise(node):
		note, err := setDrainConditions(ctx, client, node, drainState{reason: ReasonDrainUndone,
			message: fmt.Sprintf("pipeline %s/%s, step %s, torn down", req.Pipeline.Namespace, req.Pipeline.Name, req.Step)}, metav1.NewTime(d.now()))
		if err != nil {
			return contract.Result{}, err
		}
		notes = append(notes, note)
	}
	return contract.Done(withNotes("", notes)), nil
}

// undo scales back what the drain scaled up and withdraws what it asked for, when it ends,
// fails or is torn down, and says what it did.
func undo(surge *surger, ask *handoff) ([]string, error) {
	restored, err := surge.restoreAll()
	if err != nil {
		return restored, err
	}
	withdrawn, err := ask.withdrawAll()
	return append(restored, withdrawn), err
}

// mergeCreated is the created records of the drain's parts in one.
func mergeCreated(records ...map[string]string) map[string]string {
	var merged map[string]string
	for _, r := range records {
		for k, v := range r {
			if merged == nil {
				merged = map[string]string{}
			}
			merged[k] = v
		}
	}
	return merged
}

// withNotes is message followed by the notes that are not empty, each after "; ".
func withNotes(message string, notes []string) string {
	var parts []string
	for _, part := range append([]string{message}, notes...) {
		if part != "" {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "; ")
}

// Plan tells which pods Create would evict and which it would leave, as kubectl's drain
// rules sort the pods on the node now, and which PodDisruptionBudget would hold an eviction
// back; see planDrain.
func (d Drain) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	client, p, node, err := d.begin(ctx, req)
	if err != nil {
		return contract.Plan{}, err
	}
	seen := &podRecorder{Interface: client}
	list, refusals, err := podsToDrain(p.helper(ctx, seen), p.node)
	if err != nil {
		return contract.Plan{}, err
	}
	var surge *surger
	if p.replacement == ReplacementSurge {
		surge = newSurger(ctx, client, req.Pipeline.UID, nil)
	}
	rules, err := d.Rules.clusterRules()
	if err != nil {
		return contract.Plan{}, err // not read yet: the plan is asked again
	}
	p.rules = append(rules, p.rules...)
	ask := newHandoff(ctx, client, p.handoffTimeout, d.now(), nil)
	return planDrain(ctx, client, newAudience(ctx, client, req), p, node, firsts{surge, ask}, seen.pods, list, refusals)
}

// helper is kubectl's drain as node.drain runs it, acting through client.
func (p drainParams) helper(ctx context.Context, client kubernetes.Interface) *drain.Helper {
	return &drain.Helper{
		Ctx:                 ctx,
		Client:              client,
		Force:               p.policy == PolicyForce,
		GracePeriodSeconds:  p.gracePeriodSeconds,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  p.deleteEmptyDirData,
		PodSelector:         p.podSelector,
		Out:                 io.Discard,
		ErrOut:              io.Discard,
	}
}

// podsToDrain lists the node's pods as kubectl's drain sorts them. refusals are the pods
// its rules refuse to drain (unmanaged pods, local storage), which need a change of
// parameters, each with kubectl's reason in the step's terms; err is a failure to list
// them, worth a retry.
func podsToDrain(helper *drain.Helper, node string) (list *drain.PodDeleteList, refusals map[string]string, err error) {
	list, errs := helper.GetPodsForDeletion(node)
	// No list at all is a selector that did not parse, which parseDrainParams rules out.
	if isAPIError(errs) || list == nil {
		return nil, nil, fmt.Errorf("list pods of node %q: %w", node, errors.Join(errs...))
	}
	// kubectl keeps its verdict on each pod to itself; its messages name the pods they are
	// about, and say why.
	var texts []string
	for _, err := range errs {
		texts = append(texts, inStepTerms.Replace(err.Error()))
	}
	return list, podMessages(texts), nil
}

// inStepTerms turns the kubectl flags its drain's messages suggest into the parameters
// of a step that set them.
var inStepTerms = strings.NewReplacer(
	"use --delete-emptydir-data", "set deleteEmptyDirData: true",
	"use --force", "set policy: Force",
)

// fixedRefusals are kubectl's refusals, in step terms, that name nothing but the pods they
// list, and so are said of pods the status may not name too. Any other (an API error
// reading a DaemonSet) names what it is about.
var fixedRefusals = map[string]bool{
	inStepTerms.Replace("cannot delete Pods with local storage (use --delete-emptydir-data to override)"): true,
	inStepTerms.Replace("cannot delete Pods that declare no controller (use --force to override)"):        true,
}

// refusalTexts says, a line per reason, which pods kubectl's drain refuses: "REASON:
// ns/a, ns/b and 2 pods in another namespace", naming only what a may.
func refusalTexts(refusals map[string]string, a *audience) []string {
	named := map[string][]string{}
	hidden := map[string]*unnamed{}
	var reasons []string
	for _, key := range slices.Sorted(maps.Keys(refusals)) {
		reason := refusals[key]
		mayName := a.pods(namespaceOf(key))
		if !mayName && !fixedRefusals[reason] {
			reason = "cannot delete"
		}
		if !slices.Contains(reasons, reason) {
			reasons = append(reasons, reason)
		}
		if mayName {
			named[reason] = append(named[reason], key)
			continue
		}
		if hidden[reason] == nil {
			hidden[reason] = &unnamed{}
		}
		hidden[reason].add(namespaceOf(key))
	}
	slices.Sort(reasons)
	texts := make([]string, 0, len(reasons))
	for _, reason := range reasons {
		pods := strings.Join(named[reason], ", ")
		if u := hidden[reason]; u != nil {
			pods = joinAnd(pods, u.of("pod"))
		}
		texts = append(texts, reason+": "+pods)
	}
	return texts
}

// describeLeft says how many pods are left and what blocks each blocked one, naming only
// the pods a may name and counting the others.
func describeLeft(pods []corev1.Pod, blocked map[string]string, a *audience) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d pods left", len(pods))
	var hidden unnamed
	for _, pod := range pods {
		key := podKey(&pod)
		cause, ok := blocked[key]
		switch {
		case !ok:
		case a.pods(pod.Namespace):
			fmt.Fprintf(&b, "; %s: %s", key, cause)
		default:
			hidden.add(pod.Namespace)
		}
	}
	if hidden.count > 0 {
		fmt.Fprintf(&b, "; evictions refused for %s", hidden.of("pod"))
	}
	return b.String()
}

// disruptionCause is the API server's reason for refusing an eviction, which names the
// PodDisruptionBudget.
func disruptionCause(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if details := status.Status().Details; details != nil {
			for _, c := range details.Causes {
				if c.Message != "" {
					return c.Message
				}
			}
		}
	}
	return err.Error()
}

// budgetNamed finds the budget in the API server's refusal of an eviction, a cause of type
// DisruptionBudget: "The disruption budget NAME needs N healthy pods and has M currently"
// (or "... NAME is still being processed by the server").
var budgetNamed = regexp.MustCompile(`^The disruption budget ([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?) `)

// refusingBudget is the PodDisruptionBudget that refused the eviction of a pod in
// namespace, as the API server names it: only in its refusal's text, which the drain reads
// here, once, so that the step says it as data (Result.BlockedBy). A budget is always in
// its pod's namespace.
func refusingBudget(namespace string, err error) (contract.Blocker, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return contract.Blocker{}, false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type != policyv1.DisruptionBudgetCause {
			continue
		}
		if m := budgetNamed.FindStringSubmatch(c.Message); m != nil {
			return contract.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: namespace, Name: m[1]}, true
		}
	}
	return contract.Blocker{}, false
}

// isAPIError tells a failure to list pods, worth a retry, from pods that kubectl's rules
// refuse to drain (unmanaged pods, local storage), which need a change of parameters.
func isAPIError(errs []error) bool {
	for _, err := range errs {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return true
		}
	}
	return false
}

// Describe documents node.drain for the executor catalogue; the engine checks a step's
// parameters against it before any hook.
func (Drain) Describe() contract.Description {
	return contract.Description{
		Description: "Evicts the node's pods with the Eviction API, honouring PodDisruptionBudgets " +
			"(DaemonSet pods stay), a replacement first where an eviction would leave a Deployment without an available replica, " +
			"a hand-off first through the EvictionRequest API where the cluster serves it and the pod names eviction responders; " +
			"sets the Node's DrainInProgress and Drained conditions; outputs podsEvicted.",
		Parameters: []contract.Parameter{
			nodeParam(),
			{Name: "timeout", Type: contract.ParamDuration, Default: "10m",
				Description: "How long the drain may take, counted from its first call."},
			{Name: "policy", Type: contract.ParamEnum, Values: []string{PolicyFail, PolicyForce}, Default: PolicyFail,
				Description: "What happens when the timeout passes with pods left: Fail (default) fails the step, Force deletes them."},
			{Name: "replacement", Type: contract.ParamEnum, Values: []string{ReplacementSurge, ReplacementNone}, Default: ReplacementSurge,
				Description: "For a pod whose Deployment would be left with no available replica, or whose PodDisruptionBudget refuses its eviction: " +
					"Surge (default) scales the Deployment up first, evicts the pod once the replacement is available on another node, " +
					"and scales it back (in teardown too); None evicts and waits, as kubectl drain. StatefulSet and bare pods are never surged."},
			{Name: "handoffTimeout", Type: contract.ParamDuration, Default: "5m", // defaultHandoffTimeout
				Description: "Where the cluster serves the EvictionRequest API (lifecycle.k8s.io/v1alpha1), a pod that names eviction responders " +
					"(spec.evictionResponders) is asked for through an EvictionRequest, so that its own controller hands it off; " +
					"the pod is evicted with the Eviction API if they have not within this time, or the request failed."},
			{Name: "podSelector", Type: contract.ParamString,
				Description: "Label selector: drain only the pods it matches."},
			{Name: "rules", Type: contract.ParamYAML,
				Description: "Drain rules, a YAML list; the first rule that selects a pod decides it: " +
					"{name, podSelector, namespaces, nodeSelector, behavior: Drain (evicted; lower order first), Skip (left) or WaitCompleted (waited for), order}. " +
					"A pod labelled " + v1alpha1.DrainLabel + "=" + v1alpha1.DrainSkip + " is always left."},
			// -1 is kubectl's "the pod's own": a grace period of 0 would kill at once.
			{Name: "gracePeriodSeconds", Type: contract.ParamInt, Default: "-1",
				Description: "Grace period given to each pod; default: the pod's own."},
			{Name: "deleteEmptyDirData", Type: contract.ParamBool, Default: "false",
				Description: "true: evict pods with emptyDir volumes too, losing their data."},
		},
	}
}
