package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions/stepwise/v1alpha1"
)

// ApprovalAccess tells whether a user may approve the steps of a pipeline.
type ApprovalAccess interface {
	MayApprove(ctx context.Context, user string, groups []string, namespace, pipeline string) (bool, error)
}

// SubjectAccessReviews asks the API server whether the user has the verb approve on the
// pipeline: what the install's admission policy checked when the Approval was created,
// asked again when it is counted, in case the right was taken away since.
type SubjectAccessReviews struct {
	Client kubernetes.Interface
	// Timeout bounds one review, which a worker waits for; 0: DefaultReviewTimeout.
	Timeout time.Duration
}

// DefaultReviewTimeout bounds a review when SubjectAccessReviews.Timeout is 0.
const DefaultReviewTimeout = 10 * time.Second

// MayApprove implements ApprovalAccess.
func (a SubjectAccessReviews) MayApprove(ctx context.Context, user string, groups []string, namespace, pipeline string) (bool, error) {
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultReviewTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	review, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: v1alpha1.VerbApprove, Group: stepwise.GroupName, Resource: "pipelines", Name: pipeline,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("ask whether %s may approve pipeline %s/%s: %w", user, namespace, pipeline, err)
	}
	return review.Status.Allowed, nil
}

// approvalIndex indexes Approvals by their pipeline, as "namespace/name".
const approvalIndex = "pipeline"

func byApprovedPipeline(obj any) ([]string, error) {
	a, ok := obj.(*v1alpha1.Approval)
	if !ok {
		return nil, nil
	}
	return []string{a.Namespace + "/" + a.Spec.Pipeline}, nil
}

// watchApprovals indexes the Approvals by pipeline and enqueues the pipeline of each new
// one: an Approval given while the operator was down is in the first list, and counts.
func (c *Controller) watchApprovals(approvals informers.ApprovalInformer) error {
	informer := approvals.Informer()
	if err := informer.AddIndexers(cache.Indexers{approvalIndex: byApprovedPipeline}); err != nil {
		return fmt.Errorf("index approvals by pipeline: %w", err)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: c.enqueueApproved}); err != nil {
		return fmt.Errorf("add approval event handler: %w", err)
	}
	c.approvals = informer.GetIndexer()
	c.synced = syncedAll(c.synced, informer.HasSynced)
	return nil
}

// enqueueApproved enqueues the pipeline an Approval is for.
func (c *Controller) enqueueApproved(obj any) {
	if a, ok := obj.(*v1alpha1.Approval); ok {
		c.queue.Add(cache.ObjectName{Namespace: a.Namespace, Name: a.Spec.Pipeline})
	}
}

// awaitApproval holds step r, which needs approval, until enough people approved it. It
// reports whether the step may run now; when not, also when to look again (the deadline),
// and the step may have failed (a rejection, the deadline).
func (ps *pipelineSync) awaitApproval(ctx context.Context, r stepRef) (time.Duration, bool) {
	s, policy := r.s, r.step.Approval
	if s.Approval != nil && s.Approval.ApprovedTime != nil {
		return 0, true
	}
	if s.Phase != v1alpha1.StepAwaitingApproval || s.Approval == nil {
		ps.beginApprovalWait(s, policy)
	}
	wait := s.Approval
	if err := ps.countDecisions(ctx, r); err != nil {
		if !contract.IsPermanent(err) {
			// The API server did not answer a review: the wait goes on, and asks again.
			ps.setStepCondition(s, metav1.ConditionFalse, v1alpha1.ReasonAwaitingApproval, "waiting for approval; "+err.Error())
			return approvalReviewRetry, false
		}
		return ps.failStep(s, r.step, createDirection, err), false
	}
	if approvers := countedApprovers(wait); len(approvers) >= int(wait.Required) {
		wait.ApprovedTime = ps.timeNow()
		ps.normalEvent(v1alpha1.ReasonApproved, "Step %q approved by %s", s.Name, strings.Join(approvers, ", "))
		return 0, true
	}
	ps.setStepCondition(s, metav1.ConditionFalse, v1alpha1.ReasonAwaitingApproval, s.Message)
	if wait.Deadline == nil {
		return 0, false // Approvals enqueue the pipeline; nothing else is due.
	}
	left := wait.Deadline.Sub(ps.now())
	if left <= 0 {
		return ps.failStep(s, r.step, createDirection, contract.Permanent(v1alpha1.ReasonApprovalDeadlineExceeded, fmt.Errorf(
			"not approved within the deadline of %s (%d of %d approvals)", policy.Deadline.Duration, len(countedApprovers(wait)), wait.Required))), false
	}
	return left, false
}

// approvalReviewRetry is when a review the API server did not answer is asked again.
const approvalReviewRetry = 10 * time.Second

// beginApprovalWait puts step s into the wait for approval, with a request ID of its own.
func (ps *pipelineSync) beginApprovalWait(s *v1alpha1.StepStatus, policy *v1alpha1.ApprovalPolicy) {
	now := ps.now()
	since := metav1.NewTime(now)
	s.Phase = v1alpha1.StepAwaitingApproval
	s.Hook, s.Attempts, s.HookStartTime, s.NextAttemptTime, s.CompletionTime, s.BlockedBy = "", 0, nil, nil, nil, nil
	s.StartTime = &since
	s.Approval = &v1alpha1.StepApproval{
		Request:  approvalRequest(ps.p, s.Name, now),
		Since:    since,
		Required: int32(policy.EffectiveApprovals()),
	}
	if policy.Deadline != nil {
		d := metav1.NewTime(now.Add(policy.Deadline.Duration))
		s.Approval.Deadline = &d
	}
	s.Message = contract.Truncate(waitingMessage(ps.p, s, policy), v1alpha1.MaxStepMessageLength)
	ps.normalEvent(v1alpha1.ReasonAwaitingApproval, "Step %q waits for approval: %s", s.Name, s.Message)
}

// approvalRequest identifies one wait of one step: an Approval names it, so that one given
// for an earlier run of the step, or for an earlier pipeline of the same name, never
// counts. The resourceVersion differs between two waits of one step (a retry is a write in
// between) even when the clock does not.
func approvalRequest(p *v1alpha1.Pipeline, step string, since time.Time) string {
	return hashOf(struct{ UID, ResourceVersion, Step, Since string }{
		string(p.UID), p.ResourceVersion, step, since.UTC().Format(time.RFC3339Nano)})
}

// waitingMessage says who the step waits for and how to give it.
func waitingMessage(p *v1alpha1.Pipeline, s *v1alpha1.StepStatus, policy *v1alpha1.ApprovalPolicy) string {
	return fmt.Sprintf("waiting for %d approval(s) by %s: kubectl stepwise approve %s %s -n %s (or reject)",
		policy.EffectiveApprovals(), approvers(policy), p.Name, s.Name, p.Namespace)
}

// approvers says who may approve under policy.
func approvers(policy *v1alpha1.ApprovalPolicy) string {
	who := "anyone with the verb approve on the pipeline"
	if len(policy.Users)+len(policy.Groups) > 0 {
		var named []string
		if len(policy.Users) > 0 {
			named = append(named, "users "+strings.Join(policy.Users, ", "))
		}
		if len(policy.Groups) > 0 {
			named = append(named, "groups "+strings.Join(policy.Groups, ", "))
		}
		who = strings.Join(named, " or ")
	}
	if policy.FourEyes {
		who += ", not its creator"
	}
	return who
}

// countDecisions records the Approvals of step r's wait not seen yet, each counted or
// ignored with why, and returns the failure a counted rejection makes.
func (ps *pipelineSync) countDecisions(ctx context.Context, r stepRef) error {
	s, policy, wait := r.s, r.step.Approval, r.s.Approval
	for _, a := range ps.c.approvalsOf(ps.p, s.Name, wait.Request) {
		if recorded(wait, a) || repeated(wait, a) {
			// One person's same decision again changes nothing and takes no record, so
			// that someone who may create Approvals cannot fill the record (nor make the
			// operator ask the API server) with copies.
			continue
		}
		if len(wait.Decisions) == v1alpha1.MaxApprovalRecords {
			klog.FromContext(ctx).Info("Approval not read: the step keeps no more decisions", "step", s.Name, "approval", a.Name)
			return nil
		}
		rec := v1alpha1.ApprovalRecord{
			Approval: a.Name, User: a.Spec.User, Decision: a.Spec.Decision,
			Comment: contract.Truncate(a.Spec.Comment, v1alpha1.MaxApprovalCommentLength), Time: a.CreationTimestamp,
		}
		ignored, err := ps.ignoreDecision(ctx, policy, a)
		if err != nil {
			return err
		}
		if ignored != "" {
			rec.Ignored = contract.Truncate(ignored, 512)
			ps.warningEvent(v1alpha1.ReasonApprovalIgnored, "Step %q: %s by %s does not count: %s", s.Name, strings.ToLower(string(a.Spec.Decision)), a.Spec.User, ignored)
		} else {
			rec.Counted = true
		}
		wait.Decisions = append(wait.Decisions, rec)
		if rec.Counted && rec.Decision == v1alpha1.ApprovalReject {
			ps.warningEvent(v1alpha1.ReasonApprovalRejected, "Step %q rejected by %s: %s", s.Name, rec.User, rec.Comment)
			return contract.Permanent(v1alpha1.ReasonApprovalRejected, fmt.Errorf("rejected by %s: %s", rec.User, orNoComment(rec.Comment)))
		}
	}
	return nil
}

func orNoComment(comment string) string {
	if comment == "" {
		return "(no comment)"
	}
	return comment
}

// ignoreDecision says why an Approval does not count, or "" when it does. An error is a
// review the API server did not answer: the step is looked at again.
func (ps *pipelineSync) ignoreDecision(ctx context.Context, policy *v1alpha1.ApprovalPolicy, a *v1alpha1.Approval) (string, error) {
	user := a.Spec.User
	if len(policy.Users)+len(policy.Groups) > 0 && !slices.Contains(policy.Users, user) &&
		!slices.ContainsFunc(a.Spec.Groups, func(g string) bool { return slices.Contains(policy.Groups, g) }) {
		return "the step names neither the user nor a group of theirs among its approvers", nil
	}
	if policy.FourEyes {
		if why := ps.fourEyes(user); why != "" {
			return why, nil
		}
	}
	if ps.c.approvalAccess == nil {
		return "the operator cannot review who may approve", nil
	}
	ok, err := ps.c.approvalAccess.MayApprove(ctx, user, a.Spec.Groups, ps.p.Namespace, ps.p.Name)
	if err != nil {
		return "", err
	}
	if !ok {
		return user + " lacks the verb approve on the pipeline", nil
	}
	return "", nil
}

// fourEyes says why user may not approve a pipeline they, or the trigger they made,
// created; "" when they may.
func (ps *pipelineSync) fourEyes(user string) string {
	creator, ok := ps.p.Annotations[v1alpha1.AnnotationCreatedBy]
	if !ok {
		return "four eyes: the pipeline does not record who created it (the " + v1alpha1.AnnotationCreatedBy + " annotation the install's admission policy stamps)"
	}
	if creator == user {
		return "four eyes: " + user + " created the pipeline"
	}
	name, triggered := ps.p.Labels[v1alpha1.LabelTrigger]
	if !triggered {
		return ""
	}
	if ps.c.triggers == nil {
		return "four eyes: the operator does not watch triggers, and a trigger created the pipeline"
	}
	t, err := ps.c.triggers.PipelineTriggers(ps.p.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && string(t.UID) != ps.p.Labels[v1alpha1.LabelTriggerUID]):
		return "four eyes: the trigger " + name + " that created the pipeline is gone, and with it who made it"
	case err != nil:
		return "four eyes: " + err.Error()
	}
	switch maker, ok := t.Annotations[v1alpha1.AnnotationCreatedBy]; {
	case !ok:
		return "four eyes: trigger " + name + " does not record who created it"
	case maker == user:
		return "four eyes: " + user + " created trigger " + name + ", which created the pipeline"
	}
	return ""
}

// approvalsOf returns the Approvals of pipeline p's step for the wait request, oldest first.
func (c *Controller) approvalsOf(p *v1alpha1.Pipeline, step, request string) []*v1alpha1.Approval {
	if c.approvals == nil {
		return nil
	}
	objs, err := c.approvals.ByIndex(approvalIndex, p.Namespace+"/"+p.Name)
	if err != nil {
		return nil
	}
	var out []*v1alpha1.Approval
	for _, obj := range objs {
		if a, ok := obj.(*v1alpha1.Approval); ok && a.Spec.Step == step && a.Spec.Request == request {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *v1alpha1.Approval) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func recorded(wait *v1alpha1.StepApproval, a *v1alpha1.Approval) bool {
	return slices.ContainsFunc(wait.Decisions, func(r v1alpha1.ApprovalRecord) bool { return r.Approval == a.Name })
}

// repeated tells whether a's user already made a's decision on this wait, counted or
// not. A rejection after one's approval is a change of mind: it is not a repeat.
func repeated(wait *v1alpha1.StepApproval, a *v1alpha1.Approval) bool {
	return slices.ContainsFunc(wait.Decisions, func(r v1alpha1.ApprovalRecord) bool {
		return r.User == a.Spec.User && r.Decision == a.Spec.Decision
	})
}

// countedApprovers are the users whose approval counted, in order.
func countedApprovers(wait *v1alpha1.StepApproval) []string {
	var out []string
	for _, r := range wait.Decisions {
		if r.Counted && r.Decision == v1alpha1.ApprovalApprove {
			out = append(out, r.User)
		}
	}
	return out
}
