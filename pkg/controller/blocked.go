package controller

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// blockers is what holds the pipeline back, derived from the same typed state as its
// readiness r: the step's approval wait, the objects its executor says it waits on, a
// failure or a blocked teardown, suspend, a missing template. Each keeps the time it was
// first seen, so that "since" is when it began to hold, not the last sync.
func (ps *pipelineSync) blockers(r readiness) []v1alpha1.Blocker {
	if r.status == metav1.ConditionTrue {
		return nil
	}
	name, ns := ps.p.Name, ps.p.Namespace
	step := ps.stepStatus(r.current)
	var out []v1alpha1.Blocker
	add := func(b v1alpha1.Blocker) {
		if len(out) < v1alpha1.MaxBlockers {
			b.Unblock = contract.Truncate(b.Unblock, 512)
			out = append(out, b)
		}
	}
	retry := fmt.Sprintf("annotate %s=%s to retry it (kubectl annotate pipeline %s -n %s %s=%s), or edit the spec",
		v1alpha1.RetryAnnotation, r.current, name, ns, v1alpha1.RetryAnnotation, r.current)
	switch r.reason {
	case v1alpha1.ReasonAwaitingApproval:
		b := v1alpha1.Blocker{Kind: v1alpha1.BlockerApproval, Step: r.current}
		if step != nil && step.Approval != nil {
			since := step.Approval.Since
			b.Since = &since
			b.Unblock = fmt.Sprintf("%d more approval(s): kubectl stepwise approve %s %s -n %s",
				max(step.Approval.Required-countedApprovals(step.Approval), 1), name, r.current, ns)
		}
		add(b)
	case v1alpha1.ReasonSuspended:
		add(v1alpha1.Blocker{Kind: v1alpha1.BlockerSuspended, Step: r.current,
			Unblock: fmt.Sprintf("kubectl stepwise resume %s -n %s (spec.suspend false)", name, ns)})
	case v1alpha1.ReasonTemplateNotFound:
		tmpl := ""
		if ref := ps.p.Spec.TemplateRef; ref != nil {
			tmpl = ref.Name
		}
		add(v1alpha1.Blocker{Kind: v1alpha1.BlockerTemplate, Namespace: ns, Name: tmpl,
			Unblock: "create the PipelineTemplate " + ns + "/" + tmpl})
	case v1alpha1.ReasonTeardownFailed:
		how := fmt.Sprintf("annotate %s to retry its teardown", v1alpha1.RetryAnnotation)
		if ps.p.DeletionTimestamp != nil {
			how += fmt.Sprintf(", or %s=%s to leave what it created", v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan)
		}
		add(v1alpha1.Blocker{Kind: v1alpha1.BlockerTeardown, Step: r.current, Unblock: how})
	case v1alpha1.ReasonTearingDownAfterFailure:
		if step != nil && teardownBlocked(step) {
			add(v1alpha1.Blocker{Kind: v1alpha1.BlockerTeardown, Step: r.current,
				Unblock: fmt.Sprintf("annotate %s to retry its teardown", v1alpha1.RetryAnnotation)})
		}
		if f := ps.status.Failure; f != nil {
			add(v1alpha1.Blocker{Kind: v1alpha1.BlockerStepFailed, Step: f.Step, Unblock: retry})
		}
	case v1alpha1.ReasonStepFailed, v1alpha1.ReasonTornDownAfterFailure:
		add(v1alpha1.Blocker{Kind: v1alpha1.BlockerStepFailed, Step: r.current, Unblock: retry})
	case v1alpha1.ReasonArchivePending:
		add(v1alpha1.Blocker{Kind: v1alpha1.BlockerArchive, Unblock: fmt.Sprintf(
			"make the archive answer (the operator's --archive-dsn-file); or, to let the pipeline go without its record, "+
				"remove the finalizer %s by hand (kubectl edit pipeline %s -n %s)", v1alpha1.Finalizer, name, ns)})
	case v1alpha1.ReasonStepRetrying:
		add(v1alpha1.Blocker{Kind: v1alpha1.BlockerRetry, Step: r.current, Unblock: "the step is tried again after its backoff; " + retry})
	}
	// The objects the current step's executor waits on.
	if step != nil && step.Phase != v1alpha1.StepSucceeded {
		for _, o := range step.BlockedBy {
			add(v1alpha1.Blocker{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Step: r.current, Unblock: unblockObject(o)})
		}
	}
	ps.keepSince(out)
	return out
}

// unblockObject says what lets a step waiting on o go on.
func unblockObject(o v1alpha1.BlockingObject) string {
	if o.Kind == v1alpha1.BlockerPlugin {
		return "an operator that verifies the plugin " + o.Name + ": a build its signature policy or checksum accepts, installed, and the operator restarted " +
			"(kubectl stepwise executors shows why it was refused)"
	}
	if o.Kind == v1alpha1.KindPodDisruptionBudget {
		return fmt.Sprintf("the PodDisruptionBudget %s/%s allows a disruption: more of its pods healthy, or a lower minAvailable (kubectl get pdb %s -n %s)",
			o.Namespace, o.Name, o.Name, o.Namespace)
	}
	if o.Kind == v1alpha1.KindDeployment {
		return fmt.Sprintf("the replacement the drain brought up is available: every replica of Deployment %s/%s (kubectl rollout status deployment/%s -n %s)",
			o.Namespace, o.Name, o.Name, o.Namespace)
	}
	if o.Kind == v1alpha1.KindEvictionRequest {
		return fmt.Sprintf("the pod's eviction responders hand it off and it goes, or their time (the drain's handoffTimeout) passes and the drain evicts it (kubectl get evictionrequest %s -n %s)",
			o.Name, o.Namespace)
	}
	return "the " + o.Kind + " lets the step go on"
}

// keepSince gives each blocker the time the last status had for the same one, and now to
// a new one.
func (ps *pipelineSync) keepSince(blockers []v1alpha1.Blocker) {
	v1alpha1.KeepBlockerSince(blockers, ps.p.Status.BlockedBy, ps.timeNow())
}

func countedApprovals(a *v1alpha1.StepApproval) int32 {
	var n int32
	for _, d := range a.Decisions {
		if d.Counted && d.Decision == v1alpha1.ApprovalApprove {
			n++
		}
	}
	return n
}

// stepStatus is the status of the step named name, among the spec's steps, or nil.
func (ps *pipelineSync) stepStatus(name string) *v1alpha1.StepStatus {
	if name == "" {
		return nil
	}
	for i := range ps.status.Steps {
		if ps.status.Steps[i].Name == name {
			return &ps.status.Steps[i]
		}
	}
	return nil
}
