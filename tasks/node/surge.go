package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// Replacement modes of node.drain: what it does for a pod whose eviction would leave its
// workload without a ready replica, or that its PodDisruptionBudget holds back.
const (
	// ReplacementSurge scales the pod's Deployment up first, evicts the pod once the
	// replacement is available on another node (the node is cordoned), and scales the
	// Deployment back as soon as the pod is gone.
	ReplacementSurge = "Surge"
	// ReplacementNone evicts and waits, as kubectl drain does.
	ReplacementNone = "None"
)

// SurgedByAnnotation marks a Deployment node.drain scaled up, with the pipeline, the
// replicas it had and the surge (JSON, surgeRecord), so that exactly that pipeline scales
// it back, once, whatever was killed in between: the annotation goes in the same patch as
// the replicas, both ways.
const SurgedByAnnotation = "stepwise.dev/drain-surge"

// createdSurged is the key of the step's created record that lists the Deployments the
// drain may scale up ("ns/name ns/name"). It is recorded before the scale-up (the engine
// writes it with the step's status before the next call), so that teardown finds every
// Deployment the drain may have changed.
const createdSurged = "surgedDeployments"

// surgeRecord is SurgedByAnnotation's value.
type surgeRecord struct {
	Pipeline string `json:"pipeline"`
	Replicas int32  `json:"replicas"`
	Surge    int32  `json:"surge"`
}

func (r surgeRecord) owner() string { return r.Pipeline }

// surger brings replacements up before evictions, for one call of node.drain's hooks. A
// nil surger (replacement None) surges nothing and restores nothing.
type surger struct {
	ctx    context.Context
	client kubernetes.Interface
	uid    string
	// recorded is the Deployments of the created record (ns/name); intents are those this
	// call adds to it.
	recorded, intents []string
	// owners maps each pod key looked up in this call to its Deployment's key in
	// deployments ("" when it has none, and why says why); a scale-up replaces the
	// Deployment there, so that its other pods see it surged.
	owners      map[string]string
	deployments map[string]*appsv1.Deployment
	why         map[string]string
	// replicaSets maps each ReplicaSet looked up (ns/name) to one of its pods' keys.
	replicaSets map[string]string
	// autoscalers are the HorizontalPodAutoscalers of each namespace listed in this call.
	autoscalers map[string][]autoscalingv2.HorizontalPodAutoscaler
}

func newSurger(ctx context.Context, client kubernetes.Interface, uid string, created map[string]string) *surger {
	return &surger{ctx: ctx, client: client, uid: uid, recorded: strings.Fields(created[createdSurged]),
		owners: map[string]string{}, deployments: map[string]*appsv1.Deployment{}, why: map[string]string{}, replicaSets: map[string]string{},
		autoscalers: map[string][]autoscalingv2.HorizontalPodAutoscaler{}}
}

// created is the created record with this call's intents, or nil when it adds none.
func (s *surger) created() map[string]string {
	if s == nil || len(s.intents) == 0 {
		return nil
	}
	return map[string]string{createdSurged: strings.Join(append(slices.Clone(s.recorded), s.intents...), " ")}
}

// hold is what keeps a pod from being evicted now: the cause the message gives and, when
// it may be named, the Deployment it waits on.
type hold struct {
	cause   string
	blocker *contract.Blocker
}

// prepare decides whether pod (one of pods, the node's pods left) may be evicted now. A pod
// whose Deployment would be left with no available replica is held while its Deployment
// is scaled up (after the scale-up is recorded) and until the replacement is available;
// refused says the API server refused the pod's eviction for its PodDisruptionBudget in
// this call, which a replacement first answers too.
func (s *surger) prepare(pod *corev1.Pod, pods []corev1.Pod, refused bool) (*hold, error) {
	if s == nil {
		return nil, nil
	}
	d, err := s.deployment(pod)
	if err != nil || d == nil {
		return nil, err
	}
	key := d.Namespace + "/" + d.Name
	rec, surged := readSurge(d)
	if surged && rec.Pipeline != s.uid {
		return nil, nil // another drain's surge: its pods are evicted as any
	}
	onNode := s.onNode(d, pods)
	if !surged {
		if !refused && d.Status.AvailableReplicas-int32(onNode.ready) >= 1 {
			return nil, nil
		}
		// Only a pod that needs a replacement first costs a look at the autoscalers.
		a, caveat, err := s.autoscalerOf(d)
		if err != nil {
			return nil, err
		}
		if a != nil {
			return s.prepareThrough(pod, d, a, onNode)
		}
		if !slices.Contains(s.recorded, key) {
			if !slices.Contains(s.intents, key) {
				s.intents = append(s.intents, key)
			}
			return &hold{cause: fmt.Sprintf("its Deployment %s is scaled up first, to bring a replacement up on another node", key)}, nil
		}
		replicas := ptrValue(d.Spec.Replicas, 1)
		scaled, err := s.scale(d, replicas+int32(onNode.all), &surgeRecord{Pipeline: s.uid, Replicas: replicas, Surge: int32(onNode.all)})
		if apierrors.IsForbidden(err) {
			// Evicted as without a replacement first, and said so.
			s.why[podKey(pod)] = "no replacement first: the pipeline's ServiceAccount may not patch Deployments in " + d.Namespace
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		s.deployments[key] = scaled
		cause := fmt.Sprintf("its Deployment %s was scaled from %d to %d replicas for a replacement on another node", key, replicas, replicas+int32(onNode.all))
		if caveat != "" {
			cause += " (" + caveat + ")"
		}
		return &hold{cause: cause, blocker: deploymentBlocker(d)}, nil
	}
	want := rec.Replicas + rec.Surge
	if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < want {
		return &hold{cause: fmt.Sprintf("waiting for its replacement: Deployment %s has %d of %d replicas available",
			key, d.Status.AvailableReplicas, want), blocker: deploymentBlocker(d)}, nil
	}
	return nil, nil
}

// prepareThrough is prepare for a pod that needs a replacement first, of a Deployment that
// HorizontalPodAutoscaler a scales: the autoscaler's bounds are raised by the surge (after
// the intent is recorded, under the Deployment's key), and the pod is held until the
// autoscaler has scaled the Deployment up and the replacement is available.
func (s *surger) prepareThrough(pod *corev1.Pod, d *appsv1.Deployment, a *autoscalingv2.HorizontalPodAutoscaler, onNode podsOnNode) (*hold, error) {
	key, scaler := d.Namespace+"/"+d.Name, a.Namespace+"/"+a.Name
	rec, surged := readAutoscalerSurge(a)
	if surged && rec.Pipeline != s.uid {
		return nil, nil // another drain's surge
	}
	if !surged {
		if !slices.Contains(s.recorded, key) {
			if !slices.Contains(s.intents, key) {
				s.intents = append(s.intents, key)
			}
			return &hold{cause: fmt.Sprintf("its Deployment %s is scaled up first, through its HorizontalPodAutoscaler %s, to bring a replacement up on another node", key, scaler)}, nil
		}
		oldMin := ptrValue(a.Spec.MinReplicas, 1)
		floor, err := s.surgeThrough(a, d, int32(onNode.all))
		if apierrors.IsForbidden(err) {
			s.why[podKey(pod)] = "no replacement first: the pipeline's ServiceAccount may not patch HorizontalPodAutoscalers in " + d.Namespace
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &hold{cause: fmt.Sprintf("HorizontalPodAutoscaler %s's minReplicas was raised from %d to %d, for a replacement of Deployment %s on another node",
			scaler, oldMin, floor, key), blocker: deploymentBlocker(d)}, nil
	}
	want := rec.Replicas + rec.Surge
	if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < want {
		return &hold{cause: fmt.Sprintf("waiting for its replacement: HorizontalPodAutoscaler %s scales Deployment %s to %d replicas, %d available",
			scaler, key, want, d.Status.AvailableReplicas), blocker: deploymentBlocker(d)}, nil
	}
	return nil, nil
}

// wouldSurge tells whether Create would bring pod's replacement up first (blocked: a
// PodDisruptionBudget would refuse its eviction now), with the plan's note: it reads, and
// never writes. A pod it would not surge gets why, when there is one to say.
func (s *surger) wouldSurge(pod *corev1.Pod, pods []corev1.Pod, blocked bool) (string, bool, error) {
	if s == nil {
		return "", false, nil
	}
	d, err := s.deployment(pod)
	if err != nil || d == nil {
		return s.why[podKey(pod)], false, err
	}
	if rec, surged := readSurge(d); surged && rec.Pipeline != s.uid {
		return "", false, nil
	}
	on := s.onNode(d, pods)
	if !blocked && d.Status.AvailableReplicas-int32(on.ready) >= 1 {
		return "", false, nil
	}
	replicas := ptrValue(d.Spec.Replicas, 1)
	a, _, err := s.autoscalerOf(d)
	if err != nil {
		return "", false, err
	}
	if a != nil {
		return fmt.Sprintf("replacement first: HorizontalPodAutoscaler %s/%s's minReplicas raised to %d until the replacement is available on another node, then back",
			a.Namespace, a.Name, max(ptrValue(a.Spec.MinReplicas, 1), replicas+int32(on.all))), true, nil
	}
	return fmt.Sprintf("replacement first: Deployment %s/%s scaled from %d to %d replicas until the replacement is available on another node, then back",
		d.Namespace, d.Name, replicas, replicas+int32(on.all)), true, nil
}

// restoreDone scales back each Deployment this drain scaled up whose pods have all left
// the node (evicted, or going), and returns what it said.
func (s *surger) restoreDone(pods []corev1.Pod) ([]string, error) {
	if s == nil {
		return nil, nil
	}
	var said []string
	for _, key := range s.recorded {
		if slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp == nil && s.ownerKey(&p) == key }) {
			continue
		}
		msg, err := s.restore(key)
		if err != nil {
			return said, err
		}
		if msg != "" {
			said = append(said, msg)
		}
	}
	return said, nil
}

// restoreAll scales back every Deployment this drain scaled up: when the drain ends, fails
// or is torn down.
func (s *surger) restoreAll() ([]string, error) {
	if s == nil {
		return nil, nil
	}
	var said []string
	for _, key := range append(slices.Clone(s.recorded), s.intents...) {
		msg, err := s.restore(key)
		if err != nil {
			return said, err
		}
		if msg != "" {
			said = append(said, msg)
		}
	}
	return said, nil
}

// restore scales Deployment key back to the replicas it had before this pipeline's surge,
// and removes the annotation, in one patch; it does nothing to a Deployment this pipeline
// did not scale, or restored already. A Deployment whose replicas someone changed since
// keeps them: only the annotation goes.
func (s *surger) restore(key string) (string, error) {
	ns, name, _ := strings.Cut(key, "/")
	d, err := s.client.AppsV1().Deployments(ns).Get(s.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get Deployment %s to scale it back: %w", key, err)
	}
	through, err := s.restoreAutoscaler(d)
	if err != nil {
		return "", err
	}
	rec, ok := readSurge(d)
	if !ok || rec.Pipeline != s.uid {
		return through, nil
	}
	current := ptrValue(d.Spec.Replicas, 1)
	if current != rec.Replicas+rec.Surge {
		if _, err := s.scale(d, current, nil); err != nil {
			return "", err
		}
		return joinNotes(through, fmt.Sprintf("Deployment %s left at the %d replicas someone set since the drain scaled it up", key, current)), nil
	}
	if _, err := s.scale(d, rec.Replicas, nil); err != nil {
		return "", err
	}
	return joinNotes(through, fmt.Sprintf("Deployment %s scaled back to %d replicas", key, rec.Replicas)), nil
}

// scale sets d's replicas, from the replicas it has, and its SurgedByAnnotation to rec
// (removed when rec is nil), in one JSON patch whose tests make it fail rather than act on
// a Deployment that changed what the drain reads: its replicas, and its annotation as read.
// The Deployment's status, which its controller writes all the while, is no conflict. It
// returns the Deployment as patched.
func (s *surger) scale(d *appsv1.Deployment, replicas int32, rec *surgeRecord) (*appsv1.Deployment, error) {
	ops := []map[string]any{{"op": "test", "path": "/spec/replicas", "value": ptrValue(d.Spec.Replicas, 1)}}
	var value any
	if rec != nil {
		data, err := json.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("marshal the surge record: %w", err)
		}
		value = string(data)
	}
	ops = append(ops, annotationOps(d.Annotations, value)...)
	ops = append(ops, map[string]any{"op": "replace", "path": "/spec/replicas", "value": replicas})
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("marshal the scale patch: %w", err)
	}
	scaled, err := s.client.AppsV1().Deployments(d.Namespace).Patch(s.ctx, d.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "stepwise"})
	if err != nil {
		return nil, fmt.Errorf("scale Deployment %s/%s to %d replicas: %w", d.Namespace, d.Name, replicas, err)
	}
	return scaled, nil
}

// deployment is the Deployment that owns pod through its ReplicaSet, or nil with why it
// has none to surge in s.why.
func (s *surger) deployment(pod *corev1.Pod) (*appsv1.Deployment, error) {
	key := podKey(pod)
	if owner, ok := s.owners[key]; ok {
		return s.deployments[owner], nil
	}
	d, why, err := s.lookUp(pod)
	if err != nil {
		return nil, err
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "ReplicaSet" {
		s.replicaSets[pod.Namespace+"/"+ref.Name] = podKey(pod) // its pods share the answer
	}
	s.owners[key], s.why[key] = "", why
	if d != nil {
		owner := d.Namespace + "/" + d.Name
		if known, ok := s.deployments[owner]; ok {
			d = known // as this call may have scaled it
		}
		s.owners[key], s.deployments[owner] = owner, d
	}
	return d, nil
}

func (s *surger) lookUp(pod *corev1.Pod) (*appsv1.Deployment, string, error) {
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil:
		return nil, "a pod without a controller is never surged: nothing would replace it", nil
	case ref.Kind == "StatefulSet":
		return nil, "a StatefulSet's pod is never surged: its replacement has the same name and identity, so it starts only once this pod is gone", nil
	case ref.Kind != "ReplicaSet":
		return nil, fmt.Sprintf("a pod of a %s is never surged: only a Deployment's are", ref.Kind), nil
	}
	if sibling, ok := s.replicaSets[pod.Namespace+"/"+ref.Name]; ok {
		// A pod of a ReplicaSet looked up in this call: one read per ReplicaSet, not per pod.
		return s.deployments[s.owners[sibling]], s.why[sibling], nil
	}
	rs, err := s.client.AppsV1().ReplicaSets(pod.Namespace).Get(s.ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", nil // going: nothing to scale
	case apierrors.IsForbidden(err):
		return nil, "no replacement first: the pipeline's ServiceAccount may not get ReplicaSets in " + pod.Namespace, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("get the ReplicaSet of pod %s: %w", podKey(pod), err)
	}
	owner := metav1.GetControllerOf(rs)
	if owner == nil || owner.Kind != "Deployment" {
		return nil, "a ReplicaSet's pod is surged only when a Deployment owns the ReplicaSet", nil
	}
	d, err := s.client.AppsV1().Deployments(pod.Namespace).Get(s.ctx, owner.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", nil
	case apierrors.IsForbidden(err):
		return nil, "no replacement first: the pipeline's ServiceAccount may not get Deployments in " + pod.Namespace, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("get the Deployment of pod %s: %w", podKey(pod), err)
	}
	return d, "", nil
}

// withWhy is cause, with why pod was not surged when it was not.
func (s *surger) withWhy(pod *corev1.Pod, cause string) string {
	if s == nil || s.why[podKey(pod)] == "" {
		return cause
	}
	return cause + " (" + s.why[podKey(pod)] + ")"
}

// ownerKey is the ns/name of the Deployment of pod as looked up in this call, or "".
func (s *surger) ownerKey(pod *corev1.Pod) string { return s.owners[podKey(pod)] }

// podsOnNode counts a Deployment's pods left on the node, and those of them ready.
type podsOnNode struct{ all, ready int }

func (s *surger) onNode(d *appsv1.Deployment, pods []corev1.Pod) podsOnNode {
	key := d.Namespace + "/" + d.Name
	var n podsOnNode
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil || pod.Namespace != d.Namespace {
			continue
		}
		if owner, err := s.deployment(pod); err != nil || owner == nil || owner.Namespace+"/"+owner.Name != key {
			continue
		}
		n.all++
		if podReady(pod) {
			n.ready++
		}
	}
	return n
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readSurge reads d's SurgedByAnnotation; a value that does not parse is none.
func readSurge(d *appsv1.Deployment) (surgeRecord, bool) {
	return readRecord[surgeRecord](d.Annotations)
}

// readRecord reads the SurgedByAnnotation of an object with annotations, a Deployment's
// surgeRecord or an autoscaler's autoscalerRecord; a value that does not parse, or names
// no pipeline, is none.
func readRecord[R interface {
	surgeRecord | autoscalerRecord
	owner() string
}](annotations map[string]string) (R, bool) {
	var rec R
	value, ok := annotations[SurgedByAnnotation]
	if !ok || json.Unmarshal([]byte(value), &rec) != nil || rec.owner() == "" {
		var none R
		return none, false
	}
	return rec, true
}

func deploymentBlocker(d *appsv1.Deployment) *contract.Blocker {
	return &contract.Blocker{Kind: v1alpha1.KindDeployment, Namespace: d.Namespace, Name: d.Name}
}

func ptrValue(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
