package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe/termsafetest"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// waitsAt makes the steps named wait for approval (request reqSTEP), adding their status
// entry when the pipeline has none.
func waitsAt(steps ...string) func(*v1alpha1.Pipeline) {
	return func(p *v1alpha1.Pipeline) {
		for _, name := range steps {
			i := len(p.Status.Steps)
			for j, s := range p.Status.Steps {
				if s.Name == name {
					i = j
				}
			}
			if i == len(p.Status.Steps) {
				p.Status.Steps = append(p.Status.Steps, v1alpha1.StepStatus{Name: name})
			}
			p.Status.Steps[i].Phase = v1alpha1.StepAwaitingApproval
			p.Status.Steps[i].Approval = &v1alpha1.StepApproval{Request: "req" + name, Since: *at(5 * time.Second), Required: 1}
		}
	}
}

// named is pipeline p renamed, a pipeline of the trigger of UID triggerUID (named after
// the UID without its "uid-"), as the trigger makes it: labelled with it and controlled by it.
func named(name, triggerUID string) func(*v1alpha1.Pipeline) {
	trigger := strings.TrimPrefix(triggerUID, "uid-")
	return func(p *v1alpha1.Pipeline) {
		p.Name = name
		p.Labels = map[string]string{v1alpha1.LabelTrigger: trigger, v1alpha1.LabelTriggerUID: triggerUID}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PipelineTrigger",
			Name: trigger, UID: types.UID(triggerUID), Controller: ptr.To(true)}}
	}
}

// forged is pipeline p renamed, with the labels of the trigger of UID triggerUID (which
// anyone who may create a pipeline can write), and owners instead of the trigger's.
// forged is a pipeline that copied the trigger's name label, which anyone who may create
// a pipeline can; not its UID label, which the install's admission policy keeps to the
// trigger's controller.
func forged(name, triggerUID string, owners ...metav1.OwnerReference) func(*v1alpha1.Pipeline) {
	return func(p *v1alpha1.Pipeline) {
		named(name, triggerUID)(p)
		delete(p.Labels, v1alpha1.LabelTriggerUID)
		p.OwnerReferences = owners
	}
}

// nameApprovals names Approvals from their generateName as the API server does (the fake
// tracker does not): GENERATENAMEx7k20, x7k21, ...
func nameApprovals(sw *fake.Clientset) {
	n := 0
	sw.PrependReactor("create", "approvals", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Approval)
		a.Name = fmt.Sprintf("%sx7k2%d", a.GenerateName, n)
		n++
		return false, nil, nil
	})
}

// refuseApprovals makes the API server refuse the nth Approval created (from 1) and those
// after it, as the install's admission policy refuses a user without the verb approve.
func refuseApprovals(nth int) func(sw *fake.Clientset) {
	return func(sw *fake.Clientset) {
		n := 0
		sw.PrependReactor("create", "approvals", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if n++; n < nth {
				return false, nil, nil
			}
			a := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Approval)
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "stepwise.dev", Resource: "approvals"}, "",
				fmt.Errorf("ValidatingAdmissionPolicy 'stepwise-approval-identity' with binding 'stepwise-approval-identity' denied request: "+
					"bob may not approve pipeline demo/%s: that needs the verb approve on pipelines.stepwise.dev", a.Spec.Pipeline))
		})
	}
}

func TestApproveAndReject(t *testing.T) {
	retire := &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "demo", UID: "uid-retire"}}
	decision := func(pipeline, step string, d v1alpha1.ApprovalDecision, comment string) v1alpha1.ApprovalSpec {
		return v1alpha1.ApprovalSpec{Pipeline: pipeline, Step: step, Request: "req" + step, Decision: d, Comment: comment, User: "bob"}
	}
	tests := []struct {
		name    string
		objs    []runtime.Object
		args    []string
		user    string // who the API server says the caller is; bob when empty
		breakIt func(sw *fake.Clientset)
		// wantOut is what is printed; wantLines the same, in any order (a trigger's
		// pipelines come in the API server's order).
		wantOut   string
		wantLines []string
		wantErr   string   // in stderr, and the exit code is 1
		wantWarn  []string // stderr's lines, when it succeeds
		want      []v1alpha1.ApprovalSpec
	}{
		{
			name: "approve the one step that waits", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args:    []string{"approve", "hello"},
			wantOut: "approved step build of pipeline demo/hello as bob (approval hello-build-x7k20)\n",
			want:    []v1alpha1.ApprovalSpec{decision("hello", "build", v1alpha1.ApprovalApprove, "")},
		},
		{
			name: "approve a named step with a comment", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build", "publish"))},
			args:    []string{"approve", "hello", "publish", "--comment", "CHG-1234"},
			wantOut: "approved step publish of pipeline demo/hello as bob (approval hello-publish-x7k20)\n",
			want:    []v1alpha1.ApprovalSpec{decision("hello", "publish", v1alpha1.ApprovalApprove, "CHG-1234")},
		},
		{
			name: "reject with a comment", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args:    []string{"reject", "hello", "build", "--comment", "not during the freeze"},
			wantOut: "rejected step build of pipeline demo/hello as bob (approval hello-build-x7k20)\n",
			want:    []v1alpha1.ApprovalSpec{decision("hello", "build", v1alpha1.ApprovalReject, "not during the freeze")},
		},
		{
			name: "the user the API server names is printed safely", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"approve", "hello"}, user: "bob\x1b[2J",
			wantOut: `approved step build of pipeline demo/hello as bob\x1b[2J (approval hello-build-x7k20)` + "\n",
			want: []v1alpha1.ApprovalSpec{func() v1alpha1.ApprovalSpec {
				s := decision("hello", "build", v1alpha1.ApprovalApprove, "")
				s.User = "bob\x1b[2J"
				return s
			}()},
		},
		{
			name: "reject needs a comment", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"reject", "hello"}, wantErr: "error: reject needs --comment: say why",
		},
		{
			name: "reject needs a comment that says something", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"reject", "hello", "--comment", " \t"}, wantErr: "error: reject needs --comment",
		},
		{
			name: "a comment too long", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"approve", "hello", "--comment", strings.Repeat("x", 1025)}, wantErr: "error: --comment is 1025 bytes: at most 1024",
		},
		{
			name: "two steps wait and none is named", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build", "publish"))},
			args: []string{"approve", "hello"}, wantErr: "error: steps build, publish of pipeline demo/hello wait for approval: name one",
		},
		{
			name: "the named step does not wait", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"approve", "hello", "prepare"}, wantErr: "error: step prepare of pipeline demo/hello does not wait for approval",
		},
		{
			name: "no step waits", objs: []runtime.Object{pipeline(v1alpha1.StepRunning)},
			args: []string{"reject", "hello", "--comment", "no"}, wantErr: "error: no step of pipeline demo/hello waits for approval",
		},
		{
			name: "a missing pipeline", args: []string{"approve", "nope"},
			wantErr: `error: get pipeline demo/nope: pipelines.stepwise.dev "nope" not found`,
		},
		{
			name: "the admission policy's refusal, as it comes", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"approve", "hello"}, breakIt: refuseApprovals(1),
			wantErr: "error: approve step build of pipeline demo/hello: approvals.stepwise.dev is forbidden: " +
				"ValidatingAdmissionPolicy 'stepwise-approval-identity' with binding 'stepwise-approval-identity' denied request: " +
				"bob may not approve pipeline demo/hello: that needs the verb approve on pipelines.stepwise.dev",
		},
		{
			name: "another error of the API server, wrapped", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"approve", "hello"},
			breakIt: func(sw *fake.Clientset) {
				sw.PrependReactor("create", "approvals", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("etcdserver: request timed out")
				})
			},
			wantErr: "error: approve step build of pipeline demo/hello: etcdserver: request timed out\n",
		},
		{name: "nothing named", args: []string{"approve"}, wantErr: "error: approve needs a PIPELINE, or --trigger TRIGGER --all-waiting"},
		{name: "too many arguments", args: []string{"approve", "a", "b", "c"}, wantErr: "error: accepts at most 2 arg(s), received 3"},
		{
			name: "--trigger needs --all-waiting", objs: []runtime.Object{retire}, args: []string{"approve", "--trigger", "retire"},
			wantErr: "error: --trigger needs --all-waiting: approve every step that waits in the trigger's pipelines",
		},
		{
			name: "--all-waiting needs --trigger", objs: []runtime.Object{pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args: []string{"reject", "hello", "--all-waiting", "--comment", "no"}, wantErr: "error: --all-waiting needs --trigger TRIGGER",
		},
		{
			name: "a pipeline with --trigger", objs: []runtime.Object{retire, pipeline(v1alpha1.StepRunning, waitsAt("build"))},
			args:    []string{"approve", "hello", "--trigger", "retire", "--all-waiting"},
			wantErr: "error: approve --trigger decides on the steps of the trigger's pipelines: name no PIPELINE",
		},
		{
			name: "every step that waits in a trigger's pipelines, and none of another's",
			objs: []runtime.Object{
				retire,
				pipeline(v1alpha1.StepRunning, waitsAt("build"), named("hello", "uid-retire")),
				pipeline(v1alpha1.StepRunning, waitsAt("build", "publish"), named("world", "uid-retire")),
				pipeline(v1alpha1.StepRunning, named("done", "uid-retire")),
				pipeline(v1alpha1.StepRunning, waitsAt("build"), named("theirs", "uid-other")),
			},
			args: []string{"approve", "--trigger", "retire", "--all-waiting", "--comment", "CHG-1234"},
			wantLines: []string{
				"approved step build of pipeline demo/hello as bob (approval hello-build-x7k2N)",
				"approved step build of pipeline demo/world as bob (approval world-build-x7k2N)",
				"approved step publish of pipeline demo/world as bob (approval world-publish-x7k2N)",
			},
			want: []v1alpha1.ApprovalSpec{
				decision("hello", "build", v1alpha1.ApprovalApprove, "CHG-1234"),
				decision("world", "build", v1alpha1.ApprovalApprove, "CHG-1234"),
				decision("world", "publish", v1alpha1.ApprovalApprove, "CHG-1234"),
			},
		},
		{
			name: "a pipeline with the trigger's labels that the trigger does not control",
			objs: []runtime.Object{
				retire,
				pipeline(v1alpha1.StepRunning, waitsAt("build"), named("hello", "uid-retire")),
				pipeline(v1alpha1.StepRunning, waitsAt("build"), forged("unowned", "uid-retire")),
				pipeline(v1alpha1.StepRunning, waitsAt("build"), named("other-controller", "uid-retire"),
					func(p *v1alpha1.Pipeline) {
						p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr.To(true)}}
					}),
				pipeline(v1alpha1.StepRunning, waitsAt("build"), forged("not-controller", "uid-retire", metav1.OwnerReference{
					APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PipelineTrigger", Name: "retire", UID: "uid-retire"})),
				pipeline(v1alpha1.StepRunning, waitsAt("build"), forged("other-kind", "uid-retire", metav1.OwnerReference{
					APIVersion: "example.com/v1", Kind: "PipelineTrigger", Name: "retire", UID: "uid-retire", Controller: ptr.To(true)})),
				pipeline(v1alpha1.StepRunning, waitsAt("build"), named("label-disagrees", "uid-retire"),
					func(p *v1alpha1.Pipeline) { p.Labels[v1alpha1.LabelTriggerUID] = "uid-other" }),
			},
			args:      []string{"approve", "--trigger", "retire", "--all-waiting"},
			wantLines: []string{"approved step build of pipeline demo/hello as bob (approval hello-build-x7k2N)"},
			want:      []v1alpha1.ApprovalSpec{decision("hello", "build", v1alpha1.ApprovalApprove, "")},
			wantWarn: []string{
				"warning: pipeline demo/other-controller waits and carries the UID label of trigger retire, but names another controller: " +
					"not approved; if it is the trigger's, approve it by name: kubectl stepwise approve other-controller -n demo",
			},
		},
		{
			name:    "reject every step that waits in a trigger's pipelines",
			objs:    []runtime.Object{retire, pipeline(v1alpha1.StepRunning, waitsAt("build"), named("hello", "uid-retire"))},
			args:    []string{"reject", "--trigger", "retire", "--all-waiting", "--comment", "freeze"},
			wantOut: "rejected step build of pipeline demo/hello as bob (approval hello-build-x7k20)\n",
			want:    []v1alpha1.ApprovalSpec{decision("hello", "build", v1alpha1.ApprovalReject, "freeze")},
		},
		{
			name: "no step of the trigger's pipelines waits",
			objs: []runtime.Object{
				retire,
				pipeline(v1alpha1.StepRunning, named("hello", "uid-retire")),
				pipeline(v1alpha1.StepRunning, waitsAt("build"), named("theirs", "uid-other")),
			},
			args:    []string{"approve", "--trigger", "retire", "--all-waiting"},
			wantOut: "no step of the pipelines of trigger demo/retire waits for approval\n",
		},
		{
			name: "a trigger's: what was made is printed, then the refusal",
			objs: []runtime.Object{retire, pipeline(v1alpha1.StepRunning, waitsAt("build", "publish"), named("hello", "uid-retire"))},
			args: []string{"approve", "--trigger", "retire", "--all-waiting"}, breakIt: refuseApprovals(2),
			wantOut: "approved step build of pipeline demo/hello as bob (approval hello-build-x7k20)\n",
			wantErr: "error: approve step publish of pipeline demo/hello: approvals.stepwise.dev is forbidden: " +
				"ValidatingAdmissionPolicy 'stepwise-approval-identity' with binding 'stepwise-approval-identity' denied request: " +
				"bob may not approve pipeline demo/hello",
			want: []v1alpha1.ApprovalSpec{decision("hello", "build", v1alpha1.ApprovalApprove, "")},
		},
		{
			name: "a missing trigger", args: []string{"approve", "--trigger", "nope", "--all-waiting"},
			wantErr: `error: get trigger demo/nope: pipelinetriggers.stepwise.dev "nope" not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw := fakeClients(tt.objs...)
			user := tt.user
			if user == "" {
				user = "bob"
			}
			asUser(c.Kube.(*kubefake.Clientset), user)
			nameApprovals(sw)
			if tt.breakIt != nil {
				tt.breakIt(sw)
			}
			code, out, errOut := run(t, c, tt.args...)
			if tt.wantErr != "" {
				assert.Equal(t, ExitError, code)
				assert.Contains(t, errOut, tt.wantErr)
			} else {
				assert.Equal(t, ExitOK, code, errOut)
				if tt.wantWarn == nil {
					assert.Empty(t, errOut)
				} else {
					assert.ElementsMatch(t, tt.wantWarn, strings.Split(strings.TrimSuffix(errOut, "\n"), "\n"))
				}
			}
			if tt.wantLines != nil {
				var lines []string
				for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
					lines = append(lines, l[:len(l)-len("N)")]+"N)") // the API server's random characters
				}
				assert.ElementsMatch(t, tt.wantLines, lines, out)
			} else {
				assert.Equal(t, tt.wantOut, out)
			}
			termsafetest.AssertSafe(t, out)
			list, err := sw.StepwiseV1alpha1().Approvals("demo").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			var made []v1alpha1.ApprovalSpec
			for _, a := range list.Items {
				made = append(made, a.Spec)
			}
			assert.ElementsMatch(t, tt.want, made, "the Approvals made")
		})
	}
}

func TestApproveAndRejectHelp(t *testing.T) {
	tests := []struct {
		command string
		want    []string
	}{
		{command: "approve", want: []string{
			"kubectl stepwise approve (PIPELINE [STEP] | --trigger TRIGGER --all-waiting)",
			"kubectl stepwise approve retire-node-3 terminate -n ops --comment",
			"kubectl stepwise approve --trigger retire-labelled --all-waiting",
			"the verb approve", "--comment", "--all-waiting",
		}},
		{command: "reject", want: []string{
			"kubectl stepwise reject (PIPELINE [STEP] | --trigger TRIGGER --all-waiting)",
			"kubectl stepwise reject retire-node-3 -n ops --comment",
			"kubectl stepwise reject --trigger retire-labelled --all-waiting",
			"--comment is required", "onFailure",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			c, _ := fakeClients()
			code, out, errOut := run(t, c, tt.command, "--help")
			require.Equal(t, ExitOK, code, errOut)
			for _, w := range tt.want {
				assert.Contains(t, out, w)
			}
		})
	}
}
