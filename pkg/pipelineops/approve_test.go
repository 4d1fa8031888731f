package pipelineops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// bobsGroups are the groups the fake API server authenticates bob in.
var bobsGroups = []string{"sre", "system:authenticated"}

// asBob is a kube clientset whose API server authenticates the caller as bob, in
// bobsGroups.
func asBob() *kubefake.Clientset {
	kube := kubefake.NewClientset()
	kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "bob", Groups: bobsGroups}}}, nil
	})
	return kube
}

// approvalClientset serves objs and names Approvals from their generateName, as the API
// server does (the fake's tracker does not): GENERATENAME00000, 00001, ...
func approvalClientset(objs ...runtime.Object) *fake.Clientset {
	c := fakeClientset(objs...)
	n := 0
	c.PrependReactor("create", "approvals", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Approval)
		if a.Name == "" {
			a.Name = fmt.Sprintf("%s%05d", a.GenerateName, n)
			n++
		}
		return false, nil, nil
	})
	return c
}

// waitingPipeline is pipeline ns/name (UID uid-NAME) with the steps prepare (succeeded),
// drain and terminate; those named in waiting wait for approval (request reqSTEP), the
// others are pending.
func waitingPipeline(name string, labels map[string]string, waiting ...string) *v1alpha1.Pipeline {
	p := &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: labels},
		Spec: v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{
			{Name: "prepare", Executor: "test.noop"},
			{Name: "drain", Executor: "test.noop", Approval: &v1alpha1.ApprovalPolicy{}},
			{Name: "terminate", Executor: "test.noop", Approval: &v1alpha1.ApprovalPolicy{Approvals: 2}},
		}},
		Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineRunning, Steps: []v1alpha1.StepStatus{
			{Name: "prepare", Phase: v1alpha1.StepSucceeded},
			{Name: "drain", Phase: v1alpha1.StepPending},
			{Name: "terminate", Phase: v1alpha1.StepPending},
		}},
	}
	for i := range p.Status.Steps {
		s := &p.Status.Steps[i]
		for _, w := range waiting {
			if s.Name == w {
				s.Phase = v1alpha1.StepAwaitingApproval
				s.Approval = &v1alpha1.StepApproval{
					Request: "req" + w, Since: metav1.NewTime(time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)), Required: 1,
				}
			}
		}
	}
	return p
}

// approvalOf is the Approval bob's decision on step of pipeline ns/pipeline makes.
func approvalOf(pipeline, step string, decision v1alpha1.ApprovalDecision, comment string) v1alpha1.Approval {
	return v1alpha1.Approval{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: pipeline + "-" + step + "-",
			Namespace:    "ns",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "stepwise.dev/v1alpha1", Kind: "Pipeline", Name: pipeline, UID: types.UID("uid-" + pipeline),
			}},
		},
		Spec: v1alpha1.ApprovalSpec{
			Pipeline: pipeline, Step: step, Request: "req" + step, Decision: decision, Comment: comment,
			User: "bob", Groups: bobsGroups,
		},
	}
}

// approvalsIn are the Approvals of namespace ns, without the names the reactor gave them.
func approvalsIn(t *testing.T, c *fake.Clientset) []v1alpha1.Approval {
	t.Helper()
	list, err := c.StepwiseV1alpha1().Approvals("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := list.Items
	for i := range out {
		out[i].Name = ""
	}
	return out
}

func TestDecide(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "stepwise.dev", Resource: "approvals"}, "",
		errors.New("ValidatingAdmissionPolicy 'stepwise-approval-identity' denied request: bob may not approve pipeline ns/p"))
	tests := []struct {
		name     string
		p        *v1alpha1.Pipeline
		pipeline string
		step     string
		decision v1alpha1.ApprovalDecision
		comment  string
		breakIt  func(kube *kubefake.Clientset, c *fake.Clientset)
		want     v1alpha1.Approval
		wantErr  string
	}{
		{
			name: "the one step that waits", p: waitingPipeline("p", nil, "terminate"), pipeline: "p",
			decision: v1alpha1.ApprovalApprove, comment: "CHG-1234",
			want: approvalOf("p", "terminate", v1alpha1.ApprovalApprove, "CHG-1234"),
		},
		{
			name: "the named step of two that wait", p: waitingPipeline("p", nil, "drain", "terminate"), pipeline: "p", step: "drain",
			decision: v1alpha1.ApprovalApprove,
			want:     approvalOf("p", "drain", v1alpha1.ApprovalApprove, ""),
		},
		{
			name: "a rejection", p: waitingPipeline("p", nil, "terminate"), pipeline: "p", step: "terminate",
			decision: v1alpha1.ApprovalReject, comment: "not during the freeze",
			want: approvalOf("p", "terminate", v1alpha1.ApprovalReject, "not during the freeze"),
		},
		{
			name: "no step waits", p: waitingPipeline("p", nil), pipeline: "p", decision: v1alpha1.ApprovalApprove,
			wantErr: "no step of pipeline ns/p waits for approval",
		},
		{
			name: "a step awaiting approval with no approval status yet does not wait",
			p: func() *v1alpha1.Pipeline {
				p := waitingPipeline("p", nil)
				p.Status.Steps[2].Phase = v1alpha1.StepAwaitingApproval
				return p
			}(),
			pipeline: "p", decision: v1alpha1.ApprovalApprove,
			wantErr: "no step of pipeline ns/p waits for approval",
		},
		{
			name: "two wait and none is named", p: waitingPipeline("p", nil, "drain", "terminate"), pipeline: "p",
			decision: v1alpha1.ApprovalApprove,
			wantErr:  "steps drain, terminate of pipeline ns/p wait for approval: name one",
		},
		{
			name: "the named step does not wait", p: waitingPipeline("p", nil, "terminate"), pipeline: "p", step: "prepare",
			decision: v1alpha1.ApprovalApprove,
			wantErr:  "step prepare of pipeline ns/p does not wait for approval",
		},
		{
			name: "an unknown step", p: waitingPipeline("p", nil, "terminate"), pipeline: "p", step: "nope",
			decision: v1alpha1.ApprovalReject, comment: "no",
			wantErr: "step nope of pipeline ns/p does not wait for approval",
		},
		{
			name: "a missing pipeline", p: waitingPipeline("p", nil, "terminate"), pipeline: "nope",
			decision: v1alpha1.ApprovalApprove,
			wantErr:  `get pipeline ns/nope: pipelines.stepwise.dev "nope" not found`,
		},
		{
			name: "the API server does not say who you are", p: waitingPipeline("p", nil, "terminate"), pipeline: "p",
			decision: v1alpha1.ApprovalApprove,
			breakIt: func(kube *kubefake.Clientset, _ *fake.Clientset) {
				kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			},
			wantErr: "ask the API server who you are (SelfSubjectReview): connection refused",
		},
		{
			name: "the admission policy refuses the approver", p: waitingPipeline("p", nil, "terminate"), pipeline: "p",
			decision: v1alpha1.ApprovalApprove,
			breakIt: func(_ *kubefake.Clientset, c *fake.Clientset) {
				c.PrependReactor("create", "approvals", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, forbidden
				})
			},
			wantErr: "approve step terminate of pipeline ns/p: " + forbidden.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube, c := asBob(), approvalClientset(tt.p)
			if tt.breakIt != nil {
				tt.breakIt(kube, c)
			}
			got, err := Decide(context.Background(), kube, c, "ns", tt.pipeline, tt.step, tt.decision, tt.comment)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				assert.Nil(t, got)
				assert.Empty(t, approvalsIn(t, c), "no Approval is made")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want.GenerateName+"00000", got.Name, "the name the API server gave")
			assert.Equal(t, []v1alpha1.Approval{tt.want}, approvalsIn(t, c))
		})
	}
}

func TestDecideTrigger(t *testing.T) {
	trigger := &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", UID: "uid-retire"}}
	ofTrigger := map[string]string{v1alpha1.LabelTriggerUID: "uid-retire"}
	// controlled makes p a pipeline the trigger retire controls, as the trigger makes it.
	controlled := func(p *v1alpha1.Pipeline) *v1alpha1.Pipeline {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PipelineTrigger",
			Name: "retire", UID: "uid-retire", Controller: ptr.To(true)}}
		return p
	}
	// Pipelines of the trigger: a waits at terminate, b at drain and terminate, c nowhere;
	// and pipelines that are not the trigger's: another trigger's, one of no trigger, and
	// one with the trigger's label that it does not control (anyone may write a label).
	pipelines := []runtime.Object{
		controlled(waitingPipeline("a", ofTrigger, "terminate")),
		controlled(waitingPipeline("b", ofTrigger, "drain", "terminate")),
		controlled(waitingPipeline("c", ofTrigger)),
		waitingPipeline("other", map[string]string{v1alpha1.LabelTriggerUID: "uid-other"}, "terminate"),
		waitingPipeline("lone", nil, "terminate"),
		waitingPipeline("forged", map[string]string{v1alpha1.LabelTrigger: "retire"}, "terminate"),
		func() *v1alpha1.Pipeline {
			p := waitingPipeline("other-controller", ofTrigger, "terminate")
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr.To(true)}}
			return p
		}(),
	}
	tests := []struct {
		name     string
		objs     []runtime.Object
		trigger  string
		decision v1alpha1.ApprovalDecision
		comment  string
		breakIt  func(c *fake.Clientset)
		want     []v1alpha1.Approval
		// wantNotControlled: waiting pipelines with the trigger's label it does not control.
		wantNotControlled []string
		wantMade          int
		wantErr           string
		wantCount         int // Approvals in the namespace afterwards, when not len(want)
	}{
		{
			name: "every step that waits in the trigger's pipelines", objs: append([]runtime.Object{trigger}, pipelines...),
			trigger: "retire", decision: v1alpha1.ApprovalApprove, comment: "CHG-1234",
			want: []v1alpha1.Approval{
				approvalOf("a", "terminate", v1alpha1.ApprovalApprove, "CHG-1234"),
				approvalOf("b", "drain", v1alpha1.ApprovalApprove, "CHG-1234"),
				approvalOf("b", "terminate", v1alpha1.ApprovalApprove, "CHG-1234"),
			},
			wantNotControlled: []string{"other-controller"},
		},
		{
			name: "rejections likewise", objs: append([]runtime.Object{trigger}, pipelines[0], pipelines[3]),
			trigger: "retire", decision: v1alpha1.ApprovalReject, comment: "freeze",
			want: []v1alpha1.Approval{approvalOf("a", "terminate", v1alpha1.ApprovalReject, "freeze")},
		},
		{
			name: "only another trigger's pipelines wait: none", objs: []runtime.Object{trigger, pipelines[2], pipelines[3], pipelines[4]},
			trigger: "retire", decision: v1alpha1.ApprovalApprove,
		},
		{
			name: "a missing trigger", objs: pipelines, trigger: "retire", decision: v1alpha1.ApprovalApprove,
			wantErr: `get trigger ns/retire: pipelinetriggers.stepwise.dev "retire" not found`,
		},
		{
			name: "the first refusal stops it, and what was made is returned",
			objs: append([]runtime.Object{trigger}, pipelines...), trigger: "retire", decision: v1alpha1.ApprovalApprove,
			breakIt: func(c *fake.Clientset) {
				made := 0
				c.PrependReactor("create", "approvals", func(k8stesting.Action) (bool, runtime.Object, error) {
					if made++; made == 2 {
						return true, nil, errors.New("bob may not approve pipeline")
					}
					return false, nil, nil
				})
			},
			wantMade: 1, wantCount: 1,
			wantErr: "may not approve pipeline",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := approvalClientset(tt.objs...)
			if tt.breakIt != nil {
				tt.breakIt(c)
			}
			made, notControlled, err := DecideTrigger(context.Background(), asBob(), c, "ns", tt.trigger, tt.decision, tt.comment)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Len(t, made, tt.wantMade)
				assert.Len(t, approvalsIn(t, c), tt.wantCount, "what was made stays")
				return
			}
			require.NoError(t, err)
			require.Len(t, made, len(tt.want), "one Approval a waiting step")
			for _, a := range made {
				assert.True(t, strings.HasPrefix(a.Name, a.GenerateName), "named by the API server: %s", a.Name)
			}
			assert.ElementsMatch(t, tt.want, approvalsIn(t, c))
			assert.Equal(t, tt.wantNotControlled, notControlled)
		})
	}
}

func TestApprovalNamePrefix(t *testing.T) {
	long := strings.Repeat("a", 253)
	tests := []struct {
		name, pipeline, step string
		want                 string
	}{
		{name: "short names whole", pipeline: "p", step: "terminate", want: "p-terminate-"},
		{name: "57 characters whole", pipeline: strings.Repeat("p", 47), step: "terminate", want: strings.Repeat("p", 47) + "-terminate-"},
		{name: "a long pipeline name cut", pipeline: long, step: "terminate", want: strings.Repeat("a", 57) + "-"},
		{name: "a cut on a dash drops it", pipeline: strings.Repeat("p", 56), step: "terminate", want: strings.Repeat("p", 56) + "-"},
		{name: "a cut keeps what fits", pipeline: strings.Repeat("p", 54) + ".a-b", step: "drain",
			want: strings.Repeat("p", 54) + ".a-"},
		{name: "a cut on a dot drops it", pipeline: strings.Repeat("p", 56) + ".x", step: "drain", want: strings.Repeat("p", 56) + "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := approvalNamePrefix(tt.pipeline, tt.step)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), 58, "the API server's 5 random characters fit in 63")
			assert.True(t, strings.HasSuffix(got, "-"))
			assert.False(t, strings.HasSuffix(got, "--") || strings.HasSuffix(got, ".-"), "no empty or dotted part before the suffix")
		})
	}
}
