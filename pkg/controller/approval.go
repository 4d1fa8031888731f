package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
			s.Message = contract.Truncate("waiting for approval; "+err.Error(), v1alpha1.MaxStepMessageLength)
			return approvalReviewRetry, false
		}
		return ps.failStep(s, r.step, createDirection, err), false
	}
	if approvers := countedApprovers(wait); len(approvers) >= int(wait.Required) {
		wait.ApprovedTime = ps.timeNow()
		ps.record(approved(s, approvers))
		return 0, true
	}
	s.Message = contract.Truncate(waitingMessage(ps.p, s, policy), v1alpha1.MaxStepMessageLength) // after a review's error
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
	ps.record(awaitingApproval(s))
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
		who += ", not who made or changed it"
	}
	return who
}

// countDecisions records the Approvals of step r's wait not seen yet, each counted or
// ignored with why, and returns the failure a counted rejection makes.
func (ps *pipelineSync) countDecisions(ctx context.Context, r stepRef) error {
	s, policy, wait := r.s, r.step.Approval, r.s.Approval
	for _, a := range ps.env.approvalsOf(ps.p, s.Name, wait.Request) {
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
			ps.record(approvalIgnored(s, a, ignored))
		} else {
			rec.Counted = true
		}
		wait.Decisions = append(wait.Decisions, rec)
		if rec.Counted && rec.Decision == v1alpha1.ApprovalReject {
			ps.record(approvalRejected(s, &rec))
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
	if ps.env.approvalAccess == nil {
		return "the operator cannot review who may approve", nil
	}
	ok, err := ps.env.approvalAccess.MayApprove(ctx, user, a.Spec.Groups, ps.p.Namespace, ps.p.Name)
	if err != nil {
		return "", err
	}
	if !ok {
		return user + " lacks the verb approve on the pipeline", nil
	}
	return "", nil
}

// fourEyes says why user may not approve under four eyes: they created or changed the
// pipeline, the template its run took, or a trigger that created it, as the API server
// recorded them; or one of those does not record everyone who did. "" when they may.
func (ps *pipelineSync) fourEyes(user string) string {
	if why := authoredBy(v1alpha1.AuthorshipOf(kindPipeline, ps.p), user); why != "" {
		return why
	}
	snap := ps.status.Template
	if snap == nil {
		// Its own steps, which no trigger makes: its triggers, if it names any, as they are.
		for _, a := range ps.triggerAuthors() {
			if why := authoredBy(a, user); why != "" {
				return why
			}
		}
		return ""
	}
	if len(snap.Authors) == 0 {
		// Taken by an operator that did not record them: the template of the same UID
		// records everyone who made it since, a superset.
		tpl := ps.templateNamed(snap.Name)
		if tpl == nil || snap.UID == "" || string(tpl.UID) != snap.UID {
			tpl = nil
		}
		ps.recordAuthors(snap, tpl, nil)
	}
	// Triggers first: one person often makes both, and the trigger is what they ran.
	for _, kind := range []string{kindTrigger, kindTemplate} {
		for _, a := range snap.Authors {
			if a.Kind != kind {
				continue
			}
			if why := authoredBy(a, user); why != "" {
				return why
			}
		}
	}
	return ""
}

// Kinds of what a run's authors made.
const (
	kindPipeline = "Pipeline"
	kindTemplate = "PipelineTemplate"
	kindTrigger  = "PipelineTrigger"
)

// maxTriggerAuthors is how many triggers a pipeline's record of authors names: the
// status keeps at most 4 authorships, one of them its template's.
const maxTriggerAuthors = 3

// authoredBy says why user may not approve, having made a, or a not recording who did.
func authoredBy(a v1alpha1.Authorship, user string) string {
	subject, role := "the pipeline", ""
	switch a.Kind {
	case kindTemplate:
		subject, role = "template "+a.Name, ", which the run took"
	case kindTrigger:
		subject, role = "trigger "+a.Name, ", which created the pipeline"
	}
	switch {
	case a.CreatedBy == user:
		return "four eyes: " + user + " created " + subject + role
	case slices.Contains(a.EditedBy, user):
		return "four eyes: " + user + " changed " + subject + role
	}
	switch a.Unrecorded {
	case v1alpha1.AuthorsCreatorUnknown:
		return "four eyes: " + subject + " does not record who created it (the " + v1alpha1.AnnotationCreatedBy +
			" annotation the install's admission policy stamps)"
	case v1alpha1.AuthorsEditorsUnknown:
		return "four eyes: " + subject + " does not record everyone who changed it (the " + v1alpha1.AnnotationEditedBy +
			" annotation: changed before the install recorded changes, or by more users than it keeps)"
	case v1alpha1.AuthorsGone:
		return "four eyes: " + subject + role + ", was gone when the operator looked for who made it"
	case "":
		return ""
	}
	return "four eyes: " + subject + " records who made it in a way this operator does not know (" + string(a.Unrecorded) + ")"
}

// recordAuthors records in snap who made what the run took, for four eyes: tpl, the
// template (nil when gone: then the previous run's record of it, prev, if it has one),
// and the triggers the pipeline names. Whoever changes them later changes nothing of it.
func (ps *pipelineSync) recordAuthors(snap *v1alpha1.TemplateSnapshot, tpl *v1alpha1.PipelineTemplate, prev *v1alpha1.TemplateSnapshot) {
	template := v1alpha1.Authorship{Kind: kindTemplate, Name: snap.Name, UID: snap.UID, Unrecorded: v1alpha1.AuthorsGone}
	if tpl != nil {
		template = v1alpha1.AuthorshipOf(kindTemplate, tpl)
	} else if prev != nil && prev.Name == snap.Name {
		for _, a := range prev.Authors {
			if a.Kind == kindTemplate {
				template = a
			}
		}
	}
	snap.Authors = append([]v1alpha1.Authorship{template}, ps.triggerAuthors()...)
}

// triggerAuthors are who made each trigger the pipeline names as its maker: by
// LabelTriggerUID or an ownerReference. One that names itself a trigger's without being
// it only refuses more approvals; a trigger's pipeline is found by both.
func (ps *pipelineSync) triggerAuthors() []v1alpha1.Authorship {
	refs := triggerRefs(ps.p)
	if len(refs) > maxTriggerAuthors {
		// Only a pipeline someone made up names so many: it counts no approval.
		return []v1alpha1.Authorship{{Kind: kindTrigger, Name: refs[0].Name, Unrecorded: v1alpha1.AuthorsGone}}
	}
	out := make([]v1alpha1.Authorship, 0, len(refs))
	for _, ref := range refs {
		if t := ps.triggerOf(ref); t != nil {
			out = append(out, v1alpha1.AuthorshipOf(kindTrigger, t))
		} else {
			out = append(out, v1alpha1.Authorship{Kind: kindTrigger, Name: ref.Name, UID: string(ref.UID), Unrecorded: v1alpha1.AuthorsGone})
		}
	}
	return out
}

// triggerRef names a trigger a pipeline says made it.
type triggerRef struct {
	Name string
	UID  types.UID
}

// triggerRefs are the triggers p names as its maker, each once: its ownerReferences of
// kind PipelineTrigger, and its LabelTriggerUID (with LabelTrigger, which may be a hash
// of a long name, for a name). A LabelTrigger without a UID names one it cannot find.
func triggerRefs(p *v1alpha1.Pipeline) []triggerRef {
	var refs []triggerRef
	for _, r := range p.OwnerReferences {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err == nil && gv.Group == v1alpha1.SchemeGroupVersion.Group && r.Kind == kindTrigger &&
			!slices.ContainsFunc(refs, func(o triggerRef) bool { return o.UID == r.UID }) {
			refs = append(refs, triggerRef{Name: r.Name, UID: r.UID})
		}
	}
	name, named := p.Labels[v1alpha1.LabelTrigger]
	uid, ok := p.Labels[v1alpha1.LabelTriggerUID]
	if (ok || named) && !slices.ContainsFunc(refs, func(o triggerRef) bool { return ok && o.UID == types.UID(uid) }) {
		if name == "" {
			name = uid
		}
		refs = append(refs, triggerRef{Name: name, UID: types.UID(uid)})
	}
	return refs
}

// triggerOf is the trigger ref names, by UID, from the cache; nil when there is none.
func (ps *pipelineSync) triggerOf(ref triggerRef) *v1alpha1.PipelineTrigger {
	if ps.env.triggers == nil || ref.UID == "" {
		return nil
	}
	triggers := ps.env.triggers.PipelineTriggers(ps.p.Namespace)
	if t, err := triggers.Get(ref.Name); err == nil && t.UID == ref.UID {
		return t
	}
	all, err := triggers.List(labels.Everything()) // a hashed name in the label
	if err != nil {
		return nil
	}
	for _, t := range all {
		if t.UID == ref.UID {
			return t
		}
	}
	return nil
}

// templateNamed is the template of the pipeline's namespace named name, from the cache;
// nil when there is none.
func (ps *pipelineSync) templateNamed(name string) *v1alpha1.PipelineTemplate {
	if ps.env.templates == nil {
		return nil
	}
	t, err := ps.env.templates.PipelineTemplates(ps.p.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return t
}

// approvalsOf returns the Approvals of pipeline p's step for the wait request, oldest first.
func (env *syncEnv) approvalsOf(p *v1alpha1.Pipeline, step, request string) []*v1alpha1.Approval {
	if env.approvals == nil {
		return nil
	}
	objs, err := env.approvals.ByIndex(approvalIndex, p.Namespace+"/"+p.Name)
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
