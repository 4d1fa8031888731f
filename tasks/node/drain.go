package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Drain policies: what happens when the drain's timeout passes with pods left.
const (
	PolicyFail  = "Fail"  // the step fails, saying which pods are left and why
	PolicyForce = "Force" // the pods left are deleted, ignoring PodDisruptionBudgets
)

const (
	defaultDrainTimeout = 10 * time.Minute
	drainPoll           = 5 * time.Second
)

// evictionVersion is policy/v1, served by every supported Kubernetes version; asking
// discovery on every call would cost a request for nothing.
var evictionVersion = schema.GroupVersion{Group: "policy", Version: "v1"}

// Drain is node.drain: it evicts the node's pods with the Eviction API, so that
// PodDisruptionBudgets are honoured, using kubectl's drain library. DaemonSet pods are
// left alone. Each call evicts what it can and returns; until the node is empty the message
// says how many pods are left and which budget blocks which pod. Parameters: node, timeout
// (default 10m), policy (Fail or Force), podSelector, gracePeriodSeconds,
// deleteEmptyDirData. Outputs: podsEvicted, drainStarted.
type Drain struct {
	executor.Base
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
}

func (Drain) Name() string { return "node.drain" }

type drainParams struct {
	node               string
	timeout            time.Duration
	policy             string
	podSelector        string
	gracePeriodSeconds int
	deleteEmptyDirData bool
}

func parseDrainParams(req *executor.Request) (drainParams, error) {
	name, err := nodeName(req)
	if err != nil {
		return drainParams{}, err
	}
	p := drainParams{node: name, timeout: defaultDrainTimeout, policy: PolicyFail, gracePeriodSeconds: -1}
	invalid := func(param string, err error) error {
		return contract.Permanent("InvalidParameter", fmt.Errorf("parameter %q: %w", param, err))
	}
	if v := req.Params["timeout"]; v != "" {
		if p.timeout, err = time.ParseDuration(v); err != nil || p.timeout <= 0 {
			return p, invalid("timeout", fmt.Errorf("%q is not a positive duration such as 10m", v))
		}
	}
	if v := req.Params["policy"]; v != "" {
		if v != PolicyFail && v != PolicyForce {
			return p, invalid("policy", fmt.Errorf("%q is neither %s nor %s", v, PolicyFail, PolicyForce))
		}
		p.policy = v
	}
	if v := req.Params["podSelector"]; v != "" {
		if _, err := labels.Parse(v); err != nil {
			return p, invalid("podSelector", err)
		}
		p.podSelector = v
	}
	if v := req.Params["gracePeriodSeconds"]; v != "" {
		if p.gracePeriodSeconds, err = strconv.Atoi(v); err != nil {
			return p, invalid("gracePeriodSeconds", fmt.Errorf("%q is not a number", v))
		}
	}
	if v := req.Params["deleteEmptyDirData"]; v != "" {
		if p.deleteEmptyDirData, err = strconv.ParseBool(v); err != nil {
			return p, invalid("deleteEmptyDirData", fmt.Errorf("%q is not true or false", v))
		}
	}
	return p, nil
}

func (d Drain) now() time.Time {
	if d.Clock == nil {
		return time.Now()
	}
	return d.Clock.Now()
}

func (d Drain) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, err := kubeClient(req)
	if err != nil {
		return contract.Result{}, err
	}
	p, err := parseDrainParams(req)
	if err != nil {
		return contract.Result{}, err
	}
	if _, err := getNode(ctx, client, p.node); err != nil {
		return contract.Result{}, err
	}

	// The executor keeps no memory: when the drain started and how many pods it evicted
	// travel in the step's outputs, which the engine hands back on every call.
	own := req.Outputs[req.Step]
	started := d.now()
	if v, ok := own["drainStarted"]; ok {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			started = t
		}
	}
	evicted, _ := strconv.Atoi(own["podsEvicted"])
	outputs := func() map[string]string {
		return map[string]string{"drainStarted": started.UTC().Format(time.RFC3339), "podsEvicted": strconv.Itoa(evicted)}
	}

	helper := &drain.Helper{
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
	list, errs := helper.GetPodsForDeletion(p.node)
	if len(errs) > 0 {
		joined := errors.Join(errs...)
		if isAPIError(errs) {
			return contract.Result{}, fmt.Errorf("list pods of node %q: %w", p.node, joined)
		}
		return contract.Result{}, contract.Permanent("DrainBlocked", fmt.Errorf("cannot drain node %q: %w", p.node, joined))
	}
	pods := list.Pods()
	if len(pods) == 0 {
		return contract.Result{Done: true, Message: fmt.Sprintf("node drained, %d pods evicted", evicted), Outputs: outputs()}, nil
	}

	overdue := d.now().Sub(started) > p.timeout
	if overdue && p.policy == PolicyFail {
		return contract.Result{}, contract.Permanent("DrainTimeout", fmt.Errorf("node %q not drained within %s: %s",
			p.node, p.timeout, describeLeft(pods, nil)))
	}

	blocked := map[string]string{}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue // going away already
		}
		if overdue { // and the policy is Force
			if err := helper.DeletePod(pod); err != nil && !apierrors.IsNotFound(err) {
				return contract.Result{}, fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
			evicted++
			continue
		}
		err := helper.EvictPod(pod, evictionVersion)
		switch {
		case err == nil:
			evicted++
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			blocked[pod.Namespace+"/"+pod.Name] = disruptionCause(err)
		default:
			return contract.Result{}, fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return contract.Result{RequeueAfter: drainPoll, Message: describeLeft(pods, blocked), Outputs: outputs()}, nil
}

// describeLeft says how many pods are left and what blocks each blocked one.
func describeLeft(pods []corev1.Pod, blocked map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d pods left", len(pods))
	for _, pod := range pods {
		key := pod.Namespace + "/" + pod.Name
		if cause, ok := blocked[key]; ok {
			fmt.Fprintf(&b, "; %s: %s", key, cause)
		}
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

// Describe documents node.drain for the executor catalogue.
func (Drain) Describe() contract.Description {
	return contract.Description{
		Description: "Evicts the node's pods with the Eviction API, honouring PodDisruptionBudgets " +
			"(DaemonSet pods stay); outputs podsEvicted.",
		Parameters: []contract.Parameter{
			nodeParam,
			{Name: "timeout", Description: "How long the drain may take, a Go duration (default 10m)."},
			{Name: "policy", Description: "What happens when the timeout passes with pods left: Fail (default) fails the step, Force deletes them."},
			{Name: "podSelector", Description: "Label selector: drain only the pods it matches."},
			{Name: "gracePeriodSeconds", Description: "Grace period given to each pod; default: the pod's own."},
			{Name: "deleteEmptyDirData", Description: "true: evict pods with emptyDir volumes too, losing their data."},
		},
	}
}
