package controller

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// fakeApprovalAccess answers MayApprove from a set of users, and counts the questions.
type fakeApprovalAccess struct {
	mu      sync.Mutex
	allowed map[string]bool
	asked   int
	err     error
}

func (a *fakeApprovalAccess) MayApprove(_ context.Context, user string, _ []string, _, _ string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked++
	return a.allowed[user], a.err
}

func (a *fakeApprovalAccess) allow(users ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.allowed == nil {
		a.allowed = map[string]bool{}
	}
	for _, u := range users {
		a.allowed[u] = true
	}
}

// approvalPipeline is a pipeline whose step "terminate" needs approval by policy, after a
// step "cordon"; alice created it.
func approvalPipeline(policy v1alpha1.ApprovalPolicy) *v1alpha1.Pipeline {
	steps := stepsOf("cordon", "terminate")
	steps[1].Approval = &policy
	p := newPipeline(steps...)
	p.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}
	return p
}

// decide creates an Approval of the waiting step by user, as the API server would admit it.
func (f *fixture) decide(user string, decision v1alpha1.ApprovalDecision, comment string, groups ...string) {
	f.t.Helper()
	wait := stepStatus(f.get("p"), "terminate").Approval
	require.NotNil(f.t, wait, "the step waits")
	f.decideOn(wait.Request, user, decision, comment, groups...)
}

func (f *fixture) decideOn(request, user string, decision v1alpha1.ApprovalDecision, comment string, groups ...string) {
	f.t.Helper()
	n := len(f.approvals.List())
	require.NoError(f.t, f.approvals.Add(&v1alpha1.Approval{
		ObjectMeta: metav1.ObjectMeta{
			Name: "a" + strconv.Itoa(n), Namespace: "ns", UID: types.UID("a" + strconv.Itoa(n)),
			CreationTimestamp: metav1.NewTime(f.clock.Now().Add(time.Duration(n) * time.Second)),
		},
		Spec: v1alpha1.ApprovalSpec{Pipeline: "p", Step: "terminate", Request: request, Decision: decision,
			Comment: comment, User: user, Groups: groups},
	}))
}

func TestAStepWaitsForApprovalBeforeItsHooks(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{}))
	f.access.allow("bob")
	f.syncUntilIdle("p")

	assert.Equal(t, []string{"cordon/PreCreate#1", "cordon/Create#1", "cordon/PostCreate#1"}, f.exec.Calls(), "terminate runs nothing yet")
	p := f.get("p")
	s := stepStatus(p, "terminate")
	assert.Equal(t, v1alpha1.StepAwaitingApproval, s.Phase)
	require.NotNil(t, s.Approval)
	assert.Regexp(t, `^[a-z0-9]+$`, s.Approval.Request)
	assert.Equal(t, int32(1), s.Approval.Required)
	assert.Nil(t, s.Approval.Deadline, "no deadline asked")
	assert.Contains(t, s.Message, "kubectl stepwise approve p terminate -n ns")
	assert.Equal(t, v1alpha1.PipelineRunning, p.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonAwaitingApproval, readyCondition(p.Status.Conditions).Reason)
	assert.Contains(t, f.events(), "Normal "+v1alpha1.ReasonAwaitingApproval)

	f.exec.reset()
	f.decide("bob", v1alpha1.ApprovalApprove, "change CHG-7 approved")
	f.syncUntilIdle("p")
	assert.Equal(t, []string{"terminate/PreCreate#1", "terminate/Create#1", "terminate/PostCreate#1"}, f.exec.Calls())
	p = f.get("p")
	s = stepStatus(p, "terminate")
	assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
	require.NotNil(t, s.Approval.ApprovedTime)
	require.Len(t, s.Approval.Decisions, 1)
	rec := s.Approval.Decisions[0]
	assert.Equal(t, "bob", rec.User)
	assert.Equal(t, "change CHG-7 approved", rec.Comment)
	assert.True(t, rec.Counted)
	assert.Equal(t, v1alpha1.PipelineSucceeded, p.Status.Phase)
	assert.Contains(t, f.events(), "Normal "+v1alpha1.ReasonApproved)
}

func TestWhoseApprovalCounts(t *testing.T) {
	tests := []struct {
		name     string
		policy   v1alpha1.ApprovalPolicy
		trigger  *v1alpha1.PipelineTrigger // the trigger that created the pipeline, if any
		allowed  []string
		user     string
		groups   []string
		counts   bool
		ignored  string
		noRecord bool
	}{
		{name: "a user with the verb approve", allowed: []string{"bob"}, user: "bob", counts: true},
		{name: "a user without it", user: "mallory", ignored: "mallory lacks the verb approve on the pipeline"},
		{name: "the creator, without four eyes", allowed: []string{"alice"}, user: "alice", counts: true},
		{name: "the creator, under four eyes", policy: v1alpha1.ApprovalPolicy{FourEyes: true}, allowed: []string{"alice"},
			user: "alice", ignored: "four eyes: alice created the pipeline"},
		{name: "another, under four eyes", policy: v1alpha1.ApprovalPolicy{FourEyes: true}, allowed: []string{"bob"},
			user: "bob", counts: true},
		{name: "a listed user", policy: v1alpha1.ApprovalPolicy{Users: []string{"bob"}}, allowed: []string{"bob"}, user: "bob", counts: true},
		{name: "a user in a listed group", policy: v1alpha1.ApprovalPolicy{Groups: []string{"sre"}}, allowed: []string{"bob"},
			user: "bob", groups: []string{"system:authenticated", "sre"}, counts: true},
		{name: "a user not listed, with the verb", policy: v1alpha1.ApprovalPolicy{Users: []string{"carol"}, Groups: []string{"sre"}},
			allowed: []string{"bob"}, user: "bob", groups: []string{"dev"},
			ignored: "the step names neither the user nor a group of theirs among its approvers"},
		{name: "a listed user without the verb", policy: v1alpha1.ApprovalPolicy{Users: []string{"bob"}}, user: "bob",
			ignored: "bob lacks the verb approve on the pipeline"},
		{name: "the trigger's creator, under four eyes", policy: v1alpha1.ApprovalPolicy{FourEyes: true},
			trigger: triggerMadeBy("carol", "t-uid"), allowed: []string{"carol"}, user: "carol",
			ignored: "four eyes: carol created trigger retire, which created the pipeline"},
		{name: "another than the trigger's creator", policy: v1alpha1.ApprovalPolicy{FourEyes: true},
			trigger: triggerMadeBy("carol", "t-uid"), allowed: []string{"bob"}, user: "bob", counts: true},
		{name: "a trigger of the same name made since", policy: v1alpha1.ApprovalPolicy{FourEyes: true},
			trigger: triggerMadeBy("dave", "another-uid"), allowed: []string{"bob"}, user: "bob",
			ignored: "four eyes: trigger retire, which created the pipeline, was gone when the operator looked for who made it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := approvalPipeline(tt.policy)
			if tt.trigger != nil {
				p.Labels = map[string]string{v1alpha1.LabelTrigger: "retire", v1alpha1.LabelTriggerUID: "t-uid"}
				p.Annotations[v1alpha1.AnnotationCreatedBy] = "system:serviceaccount:stepwise-system:stepwise-operator"
			}
			f := newFixture(t, p)
			if tt.trigger != nil {
				require.NoError(t, f.triggers.Add(tt.trigger))
			}
			f.access.allow(tt.allowed...)
			f.syncUntilIdle("p")
			f.decide(tt.user, v1alpha1.ApprovalApprove, "", tt.groups...)
			f.syncUntilIdle("p")

			s := stepStatus(f.get("p"), "terminate")
			require.Len(t, s.Approval.Decisions, 1)
			assert.Equal(t, tt.counts, s.Approval.Decisions[0].Counted)
			assert.Equal(t, tt.ignored, s.Approval.Decisions[0].Ignored)
			if tt.counts {
				assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
			} else {
				assert.Equal(t, v1alpha1.StepAwaitingApproval, s.Phase)
				assert.Contains(t, f.events(), "Warning "+v1alpha1.ReasonApprovalIgnored)
			}
		})
	}
}

func triggerMadeBy(user, uid string) *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{
		Name: "retire", Namespace: "ns", UID: types.UID(uid),
		Annotations: map[string]string{v1alpha1.AnnotationCreatedBy: user},
	}}
}

func TestFourEyesNeedsToKnowTheCreator(t *testing.T) {
	p := approvalPipeline(v1alpha1.ApprovalPolicy{FourEyes: true})
	p.Annotations = nil
	f := newFixture(t, p)
	f.access.allow("bob")
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepAwaitingApproval, s.Phase, "who created it is unknown: no approval can be proven other")
	assert.Contains(t, s.Approval.Decisions[0].Ignored, v1alpha1.AnnotationCreatedBy)
}

func TestTwoApprovalsNeedTwoPeople(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{Approvals: 2}))
	f.access.allow("bob", "carol")
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalApprove, "")
	f.decide("bob", v1alpha1.ApprovalApprove, "again")
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepAwaitingApproval, s.Phase, "one person twice is one approval")
	assert.Len(t, s.Approval.Decisions, 1, "a repeated decision takes no record")
	assert.Equal(t, 1, f.access.asked, "and asks the API server once")

	f.decide("carol", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	s = stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
	assert.Len(t, s.Approval.Decisions, 2)
}

func TestARejectionFailsTheStepWithItsComment(t *testing.T) {
	p := approvalPipeline(v1alpha1.ApprovalPolicy{Approvals: 2})
	p.Spec.OnFailure = v1alpha1.FailureTeardown
	f := newFixture(t, p)
	f.access.allow("bob", "carol")
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalApprove, "")
	f.decide("carol", v1alpha1.ApprovalReject, "not during the freeze")
	f.exec.reset()
	f.syncUntilIdle("p")

	got := f.get("p")
	s := stepStatus(got, "terminate")
	assert.Equal(t, v1alpha1.StepFailed, s.Phase)
	assert.Equal(t, "rejected by carol: not during the freeze", s.Message)
	assert.Equal(t, v1alpha1.ReasonApprovalRejected, readyCondition(s.Conditions).Reason)
	assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
	assert.Equal(t, []string{"cordon/PreDelete#1", "cordon/Delete#1", "cordon/PostDelete#1"}, f.exec.Calls(),
		"onFailure Teardown tears down what ran; terminate never ran")
	assert.Contains(t, f.events(), "Warning "+v1alpha1.ReasonApprovalRejected)
}

func TestTheApprovalDeadlineFailsTheStep(t *testing.T) {
	p := approvalPipeline(v1alpha1.ApprovalPolicy{Deadline: &metav1.Duration{Duration: time.Hour}})
	p.Spec.OnFailure = v1alpha1.FailureTeardown
	f := newFixture(t, p)
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "terminate")
	require.NotNil(t, s.Approval.Deadline)
	assert.Equal(t, start.Add(time.Hour), s.Approval.Deadline.Time)
	assert.Equal(t, time.Hour, f.sync("p"), "looked at again at the deadline")

	f.clock.Step(time.Hour)
	f.exec.reset()
	f.syncUntilIdle("p")
	s = stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepFailed, s.Phase)
	assert.Equal(t, v1alpha1.ReasonApprovalDeadlineExceeded, readyCondition(s.Conditions).Reason)
	assert.Equal(t, "not approved within the deadline of 1h0m0s (0 of 1 approvals)", s.Message)
	assert.Equal(t, []string{"cordon/PreDelete#1", "cordon/Delete#1", "cordon/PostDelete#1"}, f.exec.Calls())
}

func TestAnApprovalOfAnotherWaitDoesNotCount(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{}))
	f.access.allow("bob", "carol")
	f.syncUntilIdle("p")
	f.decide("carol", v1alpha1.ApprovalReject, "no")
	f.syncUntilIdle("p")
	first := stepStatus(f.get("p"), "terminate")
	require.Equal(t, v1alpha1.StepFailed, first.Phase)

	// A retry asks again: the rejection was of the last wait.
	f.update("p", func(p *v1alpha1.Pipeline) { p.Annotations[v1alpha1.RetryAnnotation] = "" })
	f.clock.Step(time.Millisecond) // within the same second as the rejection
	f.syncUntilIdle("p")
	again := stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepAwaitingApproval, again.Phase)
	assert.NotEqual(t, first.Approval.Request, again.Approval.Request)
	assert.Empty(t, again.Approval.Decisions)

	f.decideOn(first.Approval.Request, "bob", v1alpha1.ApprovalApprove, "late")
	f.syncUntilIdle("p")
	assert.Equal(t, v1alpha1.StepAwaitingApproval, stepStatus(f.get("p"), "terminate").Phase, "an approval of the earlier wait")
}

func TestAnApprovalGivenWhileTheOperatorWasDownCounts(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{}))
	f.access.allow("bob")
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalApprove, "while you slept")
	g := f.restart()
	g.syncUntilIdle("p")
	s := stepStatus(g.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
	assert.Equal(t, "while you slept", s.Approval.Decisions[0].Comment)
}

func TestAReviewTheAPIServerDoesNotAnswerIsAskedAgain(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{}))
	f.syncUntilIdle("p")
	f.access.err = errors.New("connection refused")
	f.decide("bob", v1alpha1.ApprovalApprove, "")
	assert.Equal(t, approvalReviewRetry, f.sync("p"))
	s := stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepAwaitingApproval, s.Phase, "the wait goes on")
	assert.Empty(t, s.Approval.Decisions, "nothing recorded from an unanswered review")
	assert.Contains(t, readyCondition(s.Conditions).Message, "connection refused")

	f.access.err = nil
	f.access.allow("bob")
	f.syncUntilIdle("p")
	assert.Equal(t, v1alpha1.StepSucceeded, stepStatus(f.get("p"), "terminate").Phase)
}

func TestARetryOfAnApprovedStepAsksAgain(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{}))
	f.access.allow("bob")
	f.exec.on("terminate", v1alpha1.HookCreate, failWith(contract.Permanent("Boom", errors.New("boom"))))
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	require.Equal(t, v1alpha1.StepFailed, stepStatus(f.get("p"), "terminate").Phase)

	f.update("p", func(p *v1alpha1.Pipeline) { p.Annotations[v1alpha1.RetryAnnotation] = "" })
	f.exec.reset()
	f.syncUntilIdle("p")
	assert.Empty(t, f.exec.Calls(), "destructive work never re-runs on an approval of an earlier run")
	assert.Equal(t, v1alpha1.StepAwaitingApproval, stepStatus(f.get("p"), "terminate").Phase)
}

func TestAChangeOfMindRejects(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{Approvals: 2}))
	f.access.allow("bob")
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalApprove, "ok")
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalReject, "on second thought, no")
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepFailed, s.Phase)
	assert.Equal(t, "rejected by bob: on second thought, no", s.Message)
	assert.Len(t, s.Approval.Decisions, 2)
}

// TestCopiesOfADecisionTakeNoRecord: someone who may create Approvals but is not among the
// step's approvers cannot fill the step's record with copies (nor make the operator ask the
// API server about each), so a listed approver's decision still counts.
func TestCopiesOfADecisionTakeNoRecord(t *testing.T) {
	f := newFixture(t, approvalPipeline(v1alpha1.ApprovalPolicy{Users: []string{"bob"}}))
	f.access.allow("bob", "mallory")
	f.syncUntilIdle("p")
	for range 3 * v1alpha1.MaxApprovalRecords {
		f.decide("mallory", v1alpha1.ApprovalApprove, "me too")
	}
	f.syncUntilIdle("p")
	f.decide("bob", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "terminate")
	assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
	require.Len(t, s.Approval.Decisions, 2)
	assert.False(t, s.Approval.Decisions[0].Counted)
	assert.True(t, s.Approval.Decisions[1].Counted)
	assert.Equal(t, 1, f.access.asked, "only bob's decision was reviewed")
}

// TestAReviewTheAPIServerDoesNotAnswerEnds: a review holds a worker; one the API server
// never answers ends at the timeout, and the wait goes on (TestAReviewTheAPIServerDoesNotAnswerIsAskedAgain).
func TestAReviewTheAPIServerDoesNotAnswerEnds(t *testing.T) {
	stop := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stop }))
	defer server.Close()
	defer close(stop)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: server.URL})
	require.NoError(t, err)

	begin := time.Now()
	_, err = SubjectAccessReviews{Client: client, Timeout: 100 * time.Millisecond}.MayApprove(t.Context(), "bob", nil, "ns", "p")
	require.Error(t, err)
	assert.Less(t, time.Since(begin), 5*time.Second)
	assert.Contains(t, err.Error(), "ask whether bob may approve pipeline ns/p")
}
