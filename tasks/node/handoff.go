package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// EvictionRequester is the requester node.drain names in the EvictionRequests it creates
// (a domain-prefixed key: the API refuses the k8s.io ones).
const EvictionRequester = "drain.stepwise.dev/node-drain"

// createdEvictionRequests is the key of the step's created record that lists the
// EvictionRequests the drain may create ("ns/name ns/name"). It is recorded before the
// request is created, as createdSurged is, so that the drain's end and its teardown
// withdraw every one: a request left behind would evict the pod later, by surprise.
const createdEvictionRequests = "evictionRequests"

// evictionRequestsVersion serves the EvictionRequest API (alpha in Kubernetes 1.37, behind
// the EvictionRequestAPI gate); a cluster that does not serve it gets the Eviction API.
var evictionRequestsVersion = lifecyclev1alpha1.SchemeGroupVersion.String()

// evictionRequestName is the name of the drain's EvictionRequest for pod: one per pod, so
// that every call of the drain finds the one an earlier call created.
func evictionRequestName(pod *corev1.Pod) string {
	return "stepwise-drain-" + string(pod.UID)
}

// handoff asks, for one call of node.drain's hooks, through the EvictionRequest API for
// the eviction of a pod that names eviction responders (spec.evictionResponders), so that
// the workload's own controller can hand the pod's work off before it goes. A pod whose
// responders do not answer within timeout, whose request failed, or that the API or the
// ServiceAccount does not allow to ask for is evicted with the Eviction API, as any other.
// A nil handoff asks for nothing and withdraws nothing.
type handoff struct {
	ctx     context.Context
	client  kubernetes.Interface
	timeout time.Duration
	now     time.Time
	// recorded is the requests of the created record (ns/name); intents are those this
	// call adds to it.
	recorded, intents []string
	// served is whether the cluster serves the API, asked once per call and only when a
	// pod names a responder.
	served *bool
	// why says, by pod key, why a pod that names responders is evicted without a hand-off.
	why map[string]string
}

func newHandoff(ctx context.Context, client kubernetes.Interface, timeout time.Duration, now time.Time, created map[string]string) *handoff {
	return &handoff{ctx: ctx, client: client, timeout: timeout, now: now,
		recorded: strings.Fields(created[createdEvictionRequests]), why: map[string]string{}}
}

// created is the created record with this call's intents, or nil when it adds none.
func (h *handoff) created() map[string]string {
	if h == nil || len(h.intents) == 0 {
		return nil
	}
	return map[string]string{createdEvictionRequests: strings.Join(append(slices.Clone(h.recorded), h.intents...), " ")}
}

// isServed tells whether the cluster serves EvictionRequests; discovery is asked once per
// call of the drain, and only for a node with a pod that names a responder.
func (h *handoff) isServed() (bool, error) {
	if h.served != nil {
		return *h.served, nil
	}
	resources, err := h.client.Discovery().ServerResourcesForGroupVersion(evictionRequestsVersion)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("ask whether the cluster serves %s: %w", evictionRequestsVersion, err)
	}
	served := err == nil && slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "evictionrequests" })
	h.served = &served
	return served, nil
}

// ask decides whether pod waits for its responders' hand-off now, and says why: it
// records the intent to ask, then creates the request, then waits until the pod goes or
// the hand-off fails or times out, when it withdraws the request and lets the drain evict.
func (h *handoff) ask(pod *corev1.Pod) (*hold, error) {
	if h == nil || len(pod.Spec.EvictionResponders) == 0 {
		return nil, nil
	}
	if served, err := h.isServed(); err != nil || !served {
		return nil, err
	}
	key := pod.Namespace + "/" + evictionRequestName(pod)
	responders := respondersOf(pod)
	if !slices.Contains(h.recorded, key) {
		if !slices.Contains(h.intents, key) {
			h.intents = append(h.intents, key)
		}
		return &hold{cause: "asking its eviction responders (" + responders + ") to hand off first"}, nil
	}
	requests := h.client.LifecycleV1alpha1().EvictionRequests(pod.Namespace)
	req, err := requests.Get(h.ctx, evictionRequestName(pod), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		req, err = requests.Create(h.ctx, newEvictionRequest(pod), metav1.CreateOptions{})
	}
	switch {
	case apierrors.IsForbidden(err):
		h.why[podKey(pod)] = "no hand-off first: the pipeline's ServiceAccount may not create EvictionRequests in " + pod.Namespace
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("ask for the eviction of pod %s through EvictionRequest %s: %w", podKey(pod), key, err)
	}
	if req.Spec.Target.Pod == nil || req.Spec.Target.Pod.UID != pod.UID || req.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
		h.why[podKey(pod)] = "no hand-off: its EvictionRequest " + key + " was withdrawn"
		return nil, nil
	}
	if failed := meta.FindStatusCondition(req.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)); failed != nil && failed.Status == metav1.ConditionTrue {
		return nil, h.withdraw(pod, req, fmt.Sprintf("the hand-off failed (%s: %s)", failed.Reason, failed.Message))
	}
	deadline := req.CreationTimestamp.Add(h.timeout)
	if !h.now.Before(deadline) {
		return nil, h.withdraw(pod, req, fmt.Sprintf("its responders did not hand off within %s", h.timeout))
	}
	return &hold{cause: fmt.Sprintf("waiting for its eviction responders (%s) to hand off; evicted from %s if they have not",
		responders, deadline.UTC().Format(time.RFC3339)), blocker: &contract.Blocker{Kind: v1alpha1.KindEvictionRequest, Namespace: pod.Namespace, Name: req.Name}}, nil
}

// withdraw sets req's intent to Withdrawn, so that no responder acts on it any more and no
// later call asks again, and says why the pod is evicted without a hand-off.
func (h *handoff) withdraw(pod *corev1.Pod, req *lifecyclev1alpha1.EvictionRequest, why string) error {
	req = req.DeepCopy()
	req.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	if _, err := h.client.LifecycleV1alpha1().EvictionRequests(req.Namespace).Update(h.ctx, req, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("withdraw EvictionRequest %s/%s: %w", req.Namespace, req.Name, err)
	}
	h.why[podKey(pod)] = "no hand-off: " + why + ", so the Eviction API evicts it"
	return nil
}

// withdrawAll deletes every request the drain recorded, which withdraws those still
// asking: when the drain ends, fails or is torn down. It says how many it withdrew.
func (h *handoff) withdrawAll() (string, error) {
	if h == nil {
		return "", nil
	}
	withdrawn := 0
	for _, key := range append(slices.Clone(h.recorded), h.intents...) {
		ns, name, _ := strings.Cut(key, "/")
		err := h.client.LifecycleV1alpha1().EvictionRequests(ns).Delete(h.ctx, name, metav1.DeleteOptions{})
		switch {
		case err == nil:
			withdrawn++
		case apierrors.IsNotFound(err):
		default:
			return "", fmt.Errorf("delete EvictionRequest %s: %w", key, err)
		}
	}
	if withdrawn == 0 {
		return "", nil
	}
	return fmt.Sprintf("%s deleted", plural(withdrawn, "EvictionRequest")), nil
}

// withWhy is cause, with why the pod is evicted without a hand-off when its responders
// did not take it.
func (h *handoff) withWhy(pod *corev1.Pod, cause string) string {
	if h == nil || h.why[podKey(pod)] == "" {
		return cause
	}
	return cause + " (" + h.why[podKey(pod)] + ")"
}

// wouldAsk tells the plan whether pod would be handed off first, and to whom.
func (h *handoff) wouldAsk(pod *corev1.Pod) (string, bool, error) {
	if h == nil || len(pod.Spec.EvictionResponders) == 0 {
		return "", false, nil
	}
	served, err := h.isServed()
	if err != nil || !served {
		return "", false, err
	}
	return fmt.Sprintf("its eviction responders (%s) are asked to hand off through an EvictionRequest, for up to %s; then evicted", respondersOf(pod), h.timeout), true, nil
}

func newEvictionRequest(pod *corev1.Pod) *lifecyclev1alpha1.EvictionRequest {
	return &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Name: evictionRequestName(pod), Namespace: pod.Namespace},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: EvictionRequester,
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
}

// respondersOf names pod's eviction responders, highest priority first.
func respondersOf(pod *corev1.Pod) string {
	rs := slices.Clone(pod.Spec.EvictionResponders)
	slices.SortStableFunc(rs, func(a, b corev1.EvictionResponder) int {
		return int(ptrValue(b.Priority, 0)) - int(ptrValue(a.Priority, 0))
	})
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}
