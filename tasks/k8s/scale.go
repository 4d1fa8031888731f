package k8s

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Scale is k8s.scale: it scales a Deployment or a StatefulSet through its scale subresource
// and waits until the workload is ready at the new count; its teardown scales it back.
//
// Parameters: kind (Deployment, the default, or StatefulSet), name, namespace (default: the
// pipeline's), replicas (required, 0 or more) and timeout, a positive Go duration (default
// 10m); the engine checks them against Describe before any hook. It acts with the typed
// client of the Request, as the pipeline's ServiceAccount, which needs get and update on
// deployments/scale (or statefulsets/scale) and get on deployments (or statefulsets),
// whose status tells readiness.
//
// # Create
//
// The first call reads the count the workload has and records it in the output
// previousReplicas before it changes anything, so that no failure or crash between the
// scaling and the status write loses it (then it is called again at once). It never
// records it again: a re-run of the step (a retry, or a hook called twice) sees the count
// of the first run, not the one it set itself. When the workload has the count asked for
// already, it records it and goes on in the same call.
//
// Each call then sets spec.replicas through the scale subresource when it differs from
// replicas (unconditionally: without a resourceVersion, which the controller's status
// writes would keep making stale; field manager stepwise-scale), so that a count changed by
// someone else while it waits is set again, and reads the workload's status. A Deployment
// is ready once its status describes its current generation and its updated, ready and
// available replicas all equal replicas; a StatefulSet once its status describes its
// current generation, its ready replicas equal replicas and its pods are of its update
// revision (currentRevision is updateRevision, or updatedReplicas equals replicas). Until
// then it returns contract.Wait, with a message such as "2/5 replicas ready"; once timeout
// has passed since the hook's first call (which the engine tells every call, the request's
// HookStarted) the step fails for good with reason Timeout, naming the replicas seen. Once
// ready, it is done with the outputs previousReplicas and replicas.
//
// # Teardown
//
// Delete sets the count previousReplicas recorded, whatever the count is now, and waits in
// the same way (the same timeout, from the teardown hook's first call) until the workload
// is ready at it. It then clears previousReplicas: the count is restored, and a later run
// of the step (after an edit, perhaps of another workload) records its own. A step that
// never recorded a count has nothing to restore, and a workload that is gone nothing to
// restore to.
//
// API errors, Forbidden and NotFound among them, are returned wrapped, so that the engine
// retries them with the API's reason; an invalid request is permanent. For the teardown,
// NotFound means the workload is gone, which is done.
type Scale struct {
	executor.Base
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
}

func (Scale) Name() string { return "k8s.scale" }

// Outputs of k8s.scale.
const (
	// PreviousReplicasOutput is the count the workload had before the step's first run
	// scaled it: what the teardown restores.
	PreviousReplicasOutput = "previousReplicas"
	// ReplicasOutput is the count the step scaled to.
	ReplicasOutput = "replicas"
)

// Kinds k8s.scale scales.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
)

// ScaleFieldManager is the field manager of k8s.scale's writes of spec.replicas. It is not
// k8s.apply's: a manifest that sets the replicas of a workload a k8s.scale step scaled
// then fails with a Conflict that names k8s.scale, rather than fighting it unseen.
const ScaleFieldManager = "stepwise-scale"

// scalePoll is how often k8s.scale looks at the workload again while it waits.
const scalePoll = 2 * time.Second

// ReasonInvalidOutput is the reason of a step whose own earlier outputs cannot be read.
const ReasonInvalidOutput = "InvalidOutput"

type scaleParams struct {
	kind      string
	name      string
	namespace string
	replicas  int32
	timeout   time.Duration
}

// parseScaleParams reads the parameters, which the engine checked against Describe before
// the hook (required, types, the kind's values, defaults), and checks what their types do
// not say; every problem is a permanent error naming the parameter.
func parseScaleParams(req *executor.Request) (*scaleParams, error) {
	p := &scaleParams{kind: KindDeployment, name: req.String("name"), namespace: req.String("namespace"), timeout: req.Duration("timeout")}
	if req.String("kind") == KindStatefulSet {
		p.kind = KindStatefulSet
	}
	if err := nonEmpty(req, "name"); err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Subdomain(p.name); len(errs) > 0 {
		return nil, invalidParam("name", "%q is not a valid name: %s", p.name, strings.Join(errs, "; "))
	}
	if p.namespace != "" {
		if errs := validation.IsDNS1123Label(p.namespace); len(errs) > 0 {
			return nil, invalidParam("namespace", "%q is not a valid namespace: %s", p.namespace, strings.Join(errs, "; "))
		}
	}
	n := req.Int("replicas")
	switch {
	case n < 0:
		return nil, invalidParam("replicas", "%q must be 0 or more", req.String("replicas"))
	case n > math.MaxInt32:
		return nil, invalidParam("replicas", "%q is more than %d", req.String("replicas"), math.MaxInt32)
	}
	p.replicas = int32(n)
	if p.timeout <= 0 {
		return nil, invalidParam("timeout", "%q must be positive", req.String("timeout"))
	}
	return p, nil
}

// recordedReplicas reads the count an earlier call recorded in the step's outputs; an
// empty or missing value means none.
func recordedReplicas(req *executor.Request) (int32, bool, error) {
	raw := req.Outputs[req.Step][PreviousReplicasOutput]
	if raw == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(raw, 10, 32)
	if err != nil || n < 0 {
		return 0, false, contract.Permanent(ReasonInvalidOutput,
			fmt.Errorf("output %q of step %s: %q is not a replica count", PreviousReplicasOutput, req.Step, raw))
	}
	return int32(n), true, nil
}

// PreCreate refuses bad parameters before anything is read: the step fails at its first
// hook.
func (Scale) PreCreate(_ context.Context, req *executor.Request) (contract.Result, error) {
	if _, err := parseScaleParams(req); err != nil {
		return contract.Result{}, err
	}
	return contract.Result{Done: true}, nil
}

func (s Scale) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	p, err := parseScaleParams(req)
	if err != nil {
		return contract.Result{}, err
	}
	w, err := newWorkload(req, p, "scale")
	if err != nil {
		return contract.Result{}, err
	}
	previous, recorded, err := recordedReplicas(req)
	if err != nil {
		return contract.Result{}, err
	}
	current, err := w.replicas(ctx)
	if err != nil {
		return contract.Result{}, err
	}
	outputs := map[string]string{}
	if !recorded {
		previous = current
		outputs[PreviousReplicasOutput] = strconv.Itoa(int(current))
		if current != p.replicas {
			// Recorded before the scaling: the next call scales.
			return contract.Result{
				RequeueAfter: recordPoll,
				Message:      fmt.Sprintf("%s: found %d replicas, scaling to %d", w.what(), current, p.replicas),
				Outputs:      outputs,
			}, nil
		}
	}

	ready, state, err := w.scaleTo(ctx, current, p.replicas)
	if err != nil {
		return contract.Result{}, err
	}
	if !ready {
		return s.wait(req, p, p.replicas, outputs, w.what()+": ", state)
	}
	outputs[PreviousReplicasOutput] = strconv.Itoa(int(previous))
	outputs[ReplicasOutput] = strconv.Itoa(int(p.replicas))
	message := fmt.Sprintf("%s: scaled from %d to %d replicas, %s", w.what(), previous, p.replicas, state)
	if previous == p.replicas {
		message = fmt.Sprintf("%s: already at %d replicas, %s", w.what(), p.replicas, state)
	}
	return contract.DoneWithOutputs(message, outputs), nil
}

func (s Scale) Delete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	previous, recorded, err := recordedReplicas(req)
	if err != nil {
		return contract.Result{}, err
	}
	if !recorded {
		return contract.Done("nothing to restore: no replica count was recorded"), nil
	}
	p, err := parseScaleParams(req)
	if err != nil {
		return contract.Result{}, err
	}
	w, err := newWorkload(req, p, "restore")
	if err != nil {
		return contract.Result{}, err
	}
	spent := map[string]string{PreviousReplicasOutput: ""}
	gone := contract.DoneWithOutputs(w.what()+" is gone: nothing to restore", spent)

	current, err := w.replicas(ctx)
	if apierrors.IsNotFound(err) {
		return gone, nil
	}
	if err != nil {
		return contract.Result{}, err
	}
	ready, state, err := w.scaleTo(ctx, current, previous)
	if apierrors.IsNotFound(err) {
		return gone, nil
	}
	if err != nil {
		return contract.Result{}, err
	}
	if !ready {
		return s.wait(req, p, previous, nil, fmt.Sprintf("%s: restoring %d replicas: ", w.what(), previous), state)
	}
	return contract.DoneWithOutputs(fmt.Sprintf("%s: restored %d replicas, %s", w.what(), previous, state), spent), nil
}

// wait is the Result of a call that found the workload not ready at target, state telling
// how far it is: ask again soon, with the message prefix+state and the outputs given, or
// fail with reason Timeout once the hook has lasted longer than the timeout. The engine
// tells when the hook's first call was made; a request without it (from a caller other
// than the engine) is a first call.
func (s Scale) wait(req *executor.Request, p *scaleParams, target int32, outputs map[string]string, prefix, state string) (contract.Result, error) {
	now := s.now()
	started := req.HookStarted
	if started.IsZero() {
		started = now
	}
	if now.Sub(started) > p.timeout {
		return contract.Result{}, contract.Permanent(contract.ReasonTimeout,
			fmt.Errorf("%s %s: not ready at %d replicas within %s (%s)", p.kind, p.name, target, p.timeout, state))
	}
	return contract.Result{RequeueAfter: scalePoll, Message: prefix + state, Outputs: outputs}, nil
}

func (s Scale) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// workload is the Deployment or StatefulSet a k8s.scale step scales.
type workload struct {
	client         kubernetes.Interface
	kind, ns, name string
	verb           string // "scale" or "restore", for errors
}

// newWorkload returns the workload p names, reached with the request's typed client.
func newWorkload(req *executor.Request, p *scaleParams, verb string) (*workload, error) {
	if req.Clients == nil || req.Clients.Kube == nil {
		return nil, contract.Permanent("NoClient", errors.New("no Kubernetes client was given to the executor"))
	}
	ns := p.namespace
	if ns == "" {
		ns = req.Pipeline.Namespace
	}
	return &workload{client: req.Clients.Kube, kind: p.kind, ns: ns, name: p.name, verb: verb}, nil
}

// what names the workload in messages, as k8s.wait does: "Deployment web".
func (w *workload) what() string { return kindName(w.kind, "", w.name) }

// fail wraps an API error of op. An invalid request stays invalid whatever the retries,
// so that one is permanent; the others keep the API's reason (Forbidden, NotFound…) for
// the engine, which retries them.
func (w *workload) fail(op string, err error) error {
	err = fmt.Errorf("%s %s: %s: %w", w.verb, kindName(w.kind, w.ns, w.name), op, err)
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return contract.Permanent(string(apierrors.ReasonForError(err)), err)
	}
	return err
}

// replicas reads spec.replicas through the scale subresource.
func (w *workload) replicas(ctx context.Context) (int32, error) {
	var scale *autoscalingv1.Scale
	var err error
	switch w.kind {
	case KindStatefulSet:
		scale, err = w.client.AppsV1().StatefulSets(w.ns).GetScale(ctx, w.name, metav1.GetOptions{})
	default:
		scale, err = w.client.AppsV1().Deployments(w.ns).GetScale(ctx, w.name, metav1.GetOptions{})
	}
	if err != nil {
		return 0, w.fail("get scale", err)
	}
	return scale.Spec.Replicas, nil
}

// scaleTo sets spec.replicas to target unless current is target already, then tells
// whether the workload is ready at target, and how far it is.
func (w *workload) scaleTo(ctx context.Context, current, target int32) (bool, string, error) {
	if current != target {
		// No resourceVersion: the update is unconditional. The count is ours to set, and the
		// controller's status writes would make any version read stale.
		scale := &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.ns},
			Spec:       autoscalingv1.ScaleSpec{Replicas: target},
		}
		opts := metav1.UpdateOptions{FieldManager: ScaleFieldManager}
		var err error
		switch w.kind {
		case KindStatefulSet:
			_, err = w.client.AppsV1().StatefulSets(w.ns).UpdateScale(ctx, w.name, scale, opts)
		default:
			_, err = w.client.AppsV1().Deployments(w.ns).UpdateScale(ctx, w.name, scale, opts)
		}
		if err != nil {
			return false, "", w.fail("update scale", err)
		}
	}
	switch w.kind {
	case KindStatefulSet:
		sts, err := w.client.AppsV1().StatefulSets(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return false, "", w.fail("get", err)
		}
		ready, state := statefulSetProgress(sts, target)
		return ready, state, nil
	default:
		d, err := w.client.AppsV1().Deployments(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return false, "", w.fail("get", err)
		}
		ready, state := deploymentProgress(d, target)
		return ready, state, nil
	}
}

// deploymentProgress tells whether d is ready at target replicas: its status describes its
// current generation, and its updated, ready and available replicas all equal target. The
// state says "3/3 ready" then, else how far it is: "2/5 replicas ready (…)".
func deploymentProgress(d *appsv1.Deployment, target int32) (bool, string) {
	st := d.Status
	notes := []string{fmt.Sprintf("%d updated, %d available", st.UpdatedReplicas, st.AvailableReplicas)}
	notes = append(notes, staleNotes(ptr.Deref(d.Spec.Replicas, 1), target, st.ObservedGeneration, d.Generation)...)
	if len(notes) == 1 && st.UpdatedReplicas == target && st.ReadyReplicas == target && st.AvailableReplicas == target {
		return true, fmt.Sprintf("%d/%d ready", st.ReadyReplicas, target)
	}
	return false, progressState(st.ReadyReplicas, target, notes)
}

// statefulSetProgress tells whether s is ready at target replicas: its status describes
// its current generation, its ready replicas equal target, and its pods are of its update
// revision (currentRevision is updateRevision, or updatedReplicas equals target).
func statefulSetProgress(s *appsv1.StatefulSet, target int32) (bool, string) {
	st := s.Status
	var notes []string
	updated := st.CurrentRevision == st.UpdateRevision || st.UpdatedReplicas == target
	if !updated {
		notes = append(notes, fmt.Sprintf("%d updated to revision %s", st.UpdatedReplicas, st.UpdateRevision))
	}
	notes = append(notes, staleNotes(ptr.Deref(s.Spec.Replicas, 1), target, st.ObservedGeneration, s.Generation)...)
	if len(notes) == 0 && st.ReadyReplicas == target {
		return true, fmt.Sprintf("%d/%d ready", st.ReadyReplicas, target)
	}
	return false, progressState(st.ReadyReplicas, target, notes)
}

// staleNotes says why a workload's status cannot tell readiness at target yet: its spec
// asks for another count (someone changed it since it was set), or its controller has not
// seen the current generation.
func staleNotes(spec, target int32, observed, generation int64) []string {
	var notes []string
	if spec != target {
		notes = append(notes, fmt.Sprintf("spec.replicas is %d", spec))
	}
	if observed < generation {
		notes = append(notes, fmt.Sprintf("the controller has not observed generation %d yet", generation))
	}
	return notes
}

// progressState is "2/5 replicas ready", with the notes in parentheses.
func progressState(ready, target int32, notes []string) string {
	state := fmt.Sprintf("%d/%d replicas ready", ready, target)
	if len(notes) > 0 {
		state += " (" + strings.Join(notes, "; ") + ")"
	}
	return state
}

// Plan tells what Create would do: it reads the workload's count through the scale
// subresource, as Create does, and compares it with replicas. It writes nothing. A
// workload that does not exist, or that the ServiceAccount may not read, is a warning.
// Its outputs are those of Create: replicas, and previousReplicas, the count the step's
// first run recorded or else the count now.
func (Scale) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	p, err := parseScaleParams(req)
	if err != nil {
		return contract.Plan{}, err
	}
	w, err := newWorkload(req, p, "scale")
	if err != nil {
		return contract.Plan{}, err
	}
	previous, recorded, err := recordedReplicas(req)
	if err != nil {
		return contract.Plan{}, err
	}
	outputs := map[string]string{ReplicasOutput: strconv.Itoa(int(p.replicas))}
	if recorded {
		outputs[PreviousReplicasOutput] = strconv.Itoa(int(previous))
	}

	current, err := w.replicas(ctx)
	var unread string
	switch {
	case apierrors.IsNotFound(err):
		unread = "does not exist now"
	case apierrors.IsForbidden(err):
		unread = "cannot get its scale: Forbidden"
	case err != nil:
		return contract.Plan{}, err
	}
	if unread != "" {
		return contract.Plan{
			Summary:  fmt.Sprintf("scale %s to %d replicas: %s", w.what(), p.replicas, unread),
			Details:  []contract.PlanItem{planItem(w.kind, w.ns, w.name, actionScale, unread)},
			Warnings: []string{failure(err)},
			Outputs:  outputs,
		}, nil
	}
	if !recorded {
		outputs[PreviousReplicasOutput] = strconv.Itoa(int(current))
	}
	if current == p.replicas {
		return contract.Plan{
			Summary: fmt.Sprintf("%s is at %d replicas already", w.what(), current),
			Details: []contract.PlanItem{planItem(w.kind, w.ns, w.name, actionUnchanged, fmt.Sprintf("at %d already", current))},
			Outputs: outputs,
		}, nil
	}
	return contract.Plan{
		Summary: fmt.Sprintf("scale %s from %d to %d replicas", w.what(), current, p.replicas),
		Details: []contract.PlanItem{planItem(w.kind, w.ns, w.name, actionScale, fmt.Sprintf("%d → %d", current, p.replicas))},
		Outputs: outputs,
	}, nil
}

// Describe documents k8s.scale for the executor catalogue.
func (Scale) Describe() contract.Description {
	return contract.Description{
		Description: "Scales a Deployment or StatefulSet through its scale subresource and waits until it is ready at that count; " +
			"outputs previousReplicas, the count its first run found (a re-run keeps it), and replicas. " +
			"Teardown restores previousReplicas and waits until the workload is ready again; a workload that is gone is fine.",
		Parameters: []contract.Parameter{
			{Name: "kind", Type: contract.ParamEnum, Values: []string{KindDeployment, KindStatefulSet}, Default: KindDeployment,
				Description: "Deployment (the default) or StatefulSet."},
			{Name: "name", Type: contract.ParamString, Description: "Name of the Deployment or StatefulSet.", Required: true},
			{Name: "namespace", Type: contract.ParamString, Description: "Namespace of the workload (default: the pipeline's)."},
			{Name: "replicas", Type: contract.ParamInt, Description: "The number of replicas to scale to, 0 or more.", Required: true},
			{Name: "timeout", Type: contract.ParamDuration, Default: "10m",
				Description: "How long to wait for the workload to be ready, in Create and in the teardown; past it the step fails with reason Timeout."},
		},
	}
}

var (
	_ executor.TaskExecutor = Scale{}
	_ executor.Planner      = Scale{}
)
