package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	stepwisev1alpha1 "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/typed/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// approver is a person of the approval tests: a ServiceAccount of the test's namespace
// whose token the API server authenticates (no impersonation), with its clients.
type approver struct {
	user       string
	kubeconfig string
	kube       kubernetes.Interface
	stepwise   clientset.Interface
}

// approvers makes the people of ns: alice creates pipelines and triggers and may approve,
// bob may approve (the install's stepwise-approver rules), mallory may create Approvals but
// lacks the verb approve.
func approvers(t *testing.T, ns string) (alice, bob, mallory approver) {
	t.Helper()
	// The rules of the install's stepwise-approver ClusterRole (deploy/base/user-roles.yaml).
	approve := []rbacv1.PolicyRule{
		{APIGroups: []string{"stepwise.dev"}, Resources: []string{"pipelines"}, Verbs: []string{"get", "list", "watch", v1alpha1.VerbApprove}},
		{APIGroups: []string{"stepwise.dev"}, Resources: []string{"approvals"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{"stepwise.dev"}, Resources: []string{"pipelinetriggers"}, Verbs: []string{"get", "list", "watch"}},
	}
	create := rbacv1.PolicyRule{APIGroups: []string{"stepwise.dev"}, Resources: []string{"pipelines", "pipelinetriggers", "pipelinetemplates"},
		Verbs: []string{"create", "get", "list", "patch"}}
	cluster.ServiceAccount(t, ns, "alice", append(slices.Clone(approve), create)...)
	cluster.ServiceAccount(t, ns, "bob", approve...)
	cluster.ServiceAccount(t, ns, "mallory",
		rbacv1.PolicyRule{APIGroups: []string{"stepwise.dev"}, Resources: []string{"pipelines"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{"stepwise.dev"}, Resources: []string{"approvals"}, Verbs: []string{"create"}})
	return person(t, ns, "alice"), person(t, ns, "bob"), person(t, ns, "mallory")
}

// person is the approver ServiceAccount ns/name, made already.
func person(t *testing.T, ns, name string) approver {
	t.Helper()
	path, cfg := serviceAccountKubeconfig(t, cluster, ns, name)
	return approver{
		user: "system:serviceaccount:" + ns + ":" + name, kubeconfig: path,
		kube: kubernetes.NewForConfigOrDie(cfg), stepwise: clientset.NewForConfigOrDie(cfg),
	}
}

// retirementWithApproval is a pipeline whose step terminate needs approval under policy,
// after a step cordon; a failure tears down what ran.
func retirementWithApproval(ns, name string, policy v1alpha1.ApprovalPolicy) *v1alpha1.Pipeline {
	terminate := recordStep("terminate", nil)
	terminate.Approval = &policy
	p := recordPipeline(ns, name, "runner", recordStep("cordon", nil), terminate)
	p.Spec.OnFailure = v1alpha1.FailureTeardown
	return p
}

func stepOf(p *v1alpha1.Pipeline, name string) v1alpha1.StepStatus {
	for _, s := range p.Status.Steps {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.StepStatus{}
}

func awaitingApproval(step string) func(*v1alpha1.Pipeline) bool {
	return func(p *v1alpha1.Pipeline) bool { return stepOf(p, step).Phase == v1alpha1.StepAwaitingApproval }
}

// waitEvent waits for an Event of reason about pipeline ns/name whose message contains
// text, and returns its message.
func waitEvent(t *testing.T, ns, name, reason, text string) string {
	t.Helper()
	var found string
	selector := fields.Set{"involvedObject.name": name, "reason": reason}.String()
	// Events are written after the status, in the background, by a client the whole suite's
	// pipelines share: with the cores busy (a cold make test compiles while the e2e tests
	// run), one took more than 30 s.
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, text) {
				found = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no %s Event of %s/%s saying %q", reason, ns, name, text)
	return found
}

// TestAStepWaitsForAPersonsApproval: a pipeline waits at its approval step; a user without
// the verb approve is refused at admission, and so is a forged approver; its creator's
// approval does not count under four eyes; a second user's does, as the API server
// authenticated them, and the next step runs.
func TestAStepWaitsForAPersonsApproval(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	alice, bob, mallory := approvers(t, ns)

	created, err := alice.stepwise.StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		retirementWithApproval(ns, "retire", v1alpha1.ApprovalPolicy{FourEyes: true}), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, alice.user, created.Annotations[v1alpha1.AnnotationCreatedBy], "the API server records the creator")
	p := waitPipeline(t, ns, "retire", time.Minute, awaitingApproval("terminate"))
	assert.Equal(t, v1alpha1.StepSucceeded, stepOf(p, "cordon").Phase)
	assert.Equal(t, v1alpha1.ReasonAwaitingApproval, meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Reason)
	waitEvent(t, ns, "retire", v1alpha1.ReasonAwaitingApproval, "kubectl stepwise approve retire terminate")
	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "why", "retire", "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `Approval\s+terminate\s+-\s+\S+ ago\s+1 more approval\(s\): kubectl stepwise approve retire terminate -n `+ns, out)
	t.Logf("kubectl stepwise why retire (awaiting approval):\n%s", out)

	// No one may rewrite who created it, not even a cluster admin.
	_, err = stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Patch(ctx, "retire", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"stepwise.dev/created-by":"someone-else"}}}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the stepwise.dev/created-by annotation cannot change")
	// An update that drops it (a server-side apply that does not mention it) keeps it.
	kept, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Patch(ctx, "retire", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/annotations/stepwise.dev~1created-by"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, alice.user, kept.Annotations[v1alpha1.AnnotationCreatedBy])

	// Without the verb approve: refused at admission.
	_, err = pipelineops.Decide(ctx, mallory.kube, mallory.stepwise, ns, "retire", "", v1alpha1.ApprovalApprove, "")
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), mallory.user+" may not approve pipeline "+ns+"/retire")
	// A forged approver name: refused at admission.
	forged := &v1alpha1.Approval{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "forged-", Namespace: ns},
		Spec: v1alpha1.ApprovalSpec{Pipeline: "retire", Step: "terminate", Request: stepOf(p, "terminate").Approval.Request,
			Decision: v1alpha1.ApprovalApprove, User: bob.user},
	}
	_, err = mallory.stepwise.StepwiseV1alpha1().Approvals(ns).Create(ctx, forged, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.user must be the user who approves: "+mallory.user)
	// The same object from bob, whom it names, is admitted, and counts.
	_, err = bob.stepwise.StepwiseV1alpha1().Approvals(ns).Create(ctx, forged, metav1.CreateOptions{})
	require.NoError(t, err)
	p = waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	wait := stepOf(p, "terminate").Approval
	require.NotNil(t, wait)
	require.Len(t, wait.Decisions, 1)
	assert.Equal(t, bob.user, wait.Decisions[0].User)
	assert.True(t, wait.Decisions[0].Counted)
	waitEvent(t, ns, "retire", v1alpha1.ReasonApproved, "approved by "+bob.user)
}

// TestFourEyesRefusesTheCreator: the creator's approval is admitted (she has the verb)
// but does not count; another's does, with its comment in the status and the Event.
func TestFourEyesRefusesTheCreator(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	alice, bob, _ := approvers(t, ns)
	_, err := alice.stepwise.StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		retirementWithApproval(ns, "retire", v1alpha1.ApprovalPolicy{FourEyes: true}), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "retire", time.Minute, awaitingApproval("terminate"))

	_, err = pipelineops.Decide(ctx, alice.kube, alice.stepwise, ns, "retire", "terminate", v1alpha1.ApprovalApprove, "mine")
	require.NoError(t, err)
	p := waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool {
		w := stepOf(p, "terminate").Approval
		return w != nil && len(w.Decisions) == 1
	})
	rec := stepOf(p, "terminate").Approval.Decisions[0]
	assert.False(t, rec.Counted)
	assert.Equal(t, "four eyes: "+alice.user+" created the pipeline", rec.Ignored)
	assert.Equal(t, v1alpha1.StepAwaitingApproval, stepOf(p, "terminate").Phase)
	waitEvent(t, ns, "retire", v1alpha1.ReasonApprovalIgnored, "four eyes")
	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "status", "retire", "-n", ns)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "waiting for 1 approval(s) since")
	assert.Contains(t, out, "ignored: four eyes: "+alice.user+" created the pipeline")

	_, err = pipelineops.Decide(ctx, bob.kube, bob.stepwise, ns, "retire", "", v1alpha1.ApprovalApprove, "CHG-1234 approved")
	require.NoError(t, err)
	p = waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	w := stepOf(p, "terminate").Approval
	require.Len(t, w.Decisions, 2)
	assert.Equal(t, bob.user, w.Decisions[1].User)
	assert.Equal(t, "CHG-1234 approved", w.Decisions[1].Comment)
	assert.True(t, w.Decisions[1].Counted)
	require.NotNil(t, w.ApprovedTime)
	assert.Equal(t, v1alpha1.StepSucceeded, stepOf(p, "terminate").Phase, "the step ran after the approval")
}

// TestARejectionOrTheDeadlineFailsTheStep: a rejection fails the step with the comment, the
// deadline fails it too, and onFailure Teardown tears down what ran.
func TestARejectionOrTheDeadlineFailsTheStep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	_, bob, _ := approvers(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, retirementWithApproval(ns, "rejected", v1alpha1.ApprovalPolicy{}), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		retirementWithApproval(ns, "late", v1alpha1.ApprovalPolicy{Deadline: &metav1.Duration{Duration: 3 * time.Second}}), metav1.CreateOptions{})
	require.NoError(t, err)

	waitPipeline(t, ns, "rejected", time.Minute, awaitingApproval("terminate"))
	_, err = pipelineops.Decide(ctx, bob.kube, bob.stepwise, ns, "rejected", "", v1alpha1.ApprovalReject, "not during the freeze")
	require.NoError(t, err)
	tornDown := func(p *v1alpha1.Pipeline) bool {
		return p.Status.Failure != nil && p.Status.Failure.Teardown == v1alpha1.FailureTornDown
	}
	p := waitPipeline(t, ns, "rejected", time.Minute, tornDown)
	terminate := stepOf(p, "terminate")
	assert.Equal(t, v1alpha1.StepFailed, terminate.Phase)
	assert.Equal(t, "rejected by "+bob.user+": not during the freeze", terminate.Message)
	assert.Equal(t, v1alpha1.StepDeleted, stepOf(p, "cordon").Phase, "what ran was torn down")
	assert.Nil(t, terminate.Ran, "the rejected step never ran")
	waitEvent(t, ns, "rejected", v1alpha1.ReasonApprovalRejected, "not during the freeze")

	p = waitPipeline(t, ns, "late", time.Minute, tornDown)
	terminate = stepOf(p, "terminate")
	assert.Equal(t, v1alpha1.StepFailed, terminate.Phase)
	assert.Equal(t, v1alpha1.ReasonApprovalDeadlineExceeded, meta.FindStatusCondition(terminate.Conditions, v1alpha1.ConditionReady).Reason)
	assert.Equal(t, v1alpha1.StepDeleted, stepOf(p, "cordon").Phase)
}

// TestATriggerWaitsForApprovalOfEachNode: a template's approval step makes each of a
// trigger's pipelines wait; one command approves every waiting one, each recorded in the
// approver's name; under four eyes, the trigger's creator cannot.
func TestATriggerWaitsForApprovalOfEachNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	triggerRetirer(t, ns)
	alice, bob, _ := approvers(t, ns)
	approval := recordStep("terminate", nil)
	approval.Approval = &v1alpha1.ApprovalPolicy{FourEyes: true}
	template := &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: ns},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params: []v1alpha1.TemplateParam{{Name: "node", Required: true}, {Name: "pool"}},
			Steps:  []v1alpha1.Step{recordStep("cordon", nil), approval},
		},
	}
	_, err := alice.stepwise.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, template, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 2 {
		node, err := cluster.CreateFakeNode(ctx, ns+"-node-"+string(rune('a'+i)))
		require.NoError(t, err)
		_, err = cluster.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"stepwise.dev/retire":"true","pool":"`+ns+`"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
		})
	}
	trigger, err := alice.stepwise.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, "retirer", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, alice.user, trigger.Annotations[v1alpha1.AnnotationCreatedBy])

	bothWaiting := func() bool {
		waiting := 0
		for _, p := range triggerPipelines(t, ns, "retire") {
			waiting += len(p.AwaitingApproval())
		}
		return waiting == 2
	}
	require.Eventually(t, bothWaiting, time.Minute, 100*time.Millisecond, "operator log: %s", operator.Log)
	waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool { return tr.Status.AwaitingApproval == 2 })
	code, out, errOut := stepwiseCLI(t, bob.kubeconfig, "triggers", "retire", "-n", ns)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "2 pipelines wait for approval: kubectl stepwise approve --trigger retire --all-waiting -n "+ns)

	// The trigger's pipelines are those it controls (their controller ownerReference), not
	// those with its labels, which anyone who may create a pipeline can copy.
	made, notControlled, err := pipelineops.DecideTrigger(ctx, alice.kube, alice.stepwise, ns, "retire", v1alpha1.ApprovalApprove, "")
	require.NoError(t, err)
	require.Len(t, made, 2)
	assert.Empty(t, notControlled, "the trigger controls its pipelines")
	// bob, with the command a person types.
	code, out, errOut = stepwiseCLI(t, bob.kubeconfig, "approve", "--trigger", "retire", "--all-waiting", "-n", ns, "--comment", "batch 7")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2, out)
	assert.Contains(t, out, "as "+bob.user)

	require.Eventually(t, func() bool {
		pipelines := triggerPipelines(t, ns, "retire")
		for _, p := range pipelines {
			if p.Status.Phase != v1alpha1.PipelineSucceeded {
				return false
			}
		}
		return len(pipelines) == 2
	}, time.Minute, 100*time.Millisecond, "operator log: %s", operator.Log)
	for _, p := range triggerPipelines(t, ns, "retire") {
		w := stepOf(&p, "terminate").Approval
		require.Len(t, w.Decisions, 2, p.Name)
		assert.Equal(t, "four eyes: "+alice.user+" created trigger retire, which created the pipeline", w.Decisions[0].Ignored)
		assert.Equal(t, bob.user, w.Decisions[1].User)
		assert.True(t, w.Decisions[1].Counted)
	}
}

// TestAnApprovalGivenWhileTheOperatorIsDownCounts: the wait and its record are in the
// status, and the Approvals in the API server: an operator started after the approval
// finds it in its first list, and the record it wrote before stays.
func TestAnApprovalGivenWhileTheOperatorIsDownCounts(t *testing.T) {
	// Not parallel: it stops the shared operator.
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	alice, bob, _ := approvers(t, ns)
	_, err := alice.stepwise.StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		retirementWithApproval(ns, "retire", v1alpha1.ApprovalPolicy{Approvals: 2, FourEyes: true}), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "retire", time.Minute, awaitingApproval("terminate"))
	_, err = pipelineops.Decide(ctx, alice.kube, alice.stepwise, ns, "retire", "", v1alpha1.ApprovalApprove, "mine")
	require.NoError(t, err)
	before := waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool {
		w := stepOf(p, "terminate").Approval
		return w != nil && len(w.Decisions) == 1
	})

	if err := operator.Stop(); err != nil {
		t.Logf("stop operator: %v", err) // it may exit non-zero on SIGTERM; replaced below
	}
	_, err = pipelineops.Decide(ctx, bob.kube, bob.stepwise, ns, "retire", "", v1alpha1.ApprovalApprove, "while it was down")
	require.NoError(t, err)
	operator, err = cluster.StartOperator(pluginArgs()...)
	require.NoError(t, err)

	// Two approvals needed, alice's does not count (four eyes): bob's alone is not enough.
	p := waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool {
		w := stepOf(p, "terminate").Approval
		return w != nil && len(w.Decisions) == 2
	})
	w := stepOf(p, "terminate").Approval
	assert.Equal(t, stepOf(before, "terminate").Approval.Decisions[0], w.Decisions[0], "the record survives the restart")
	assert.Equal(t, bob.user, w.Decisions[1].User)
	assert.True(t, w.Decisions[1].Counted)
	assert.Equal(t, "while it was down", w.Decisions[1].Comment)
	assert.Equal(t, v1alpha1.StepAwaitingApproval, stepOf(p, "terminate").Phase, "one of two approvals")
}

// TestFourEyesRefusesWhoChangedTheTemplate: the API server records who created a template
// and who changed its spec since, which no user can write themselves; the run keeps that
// record from when it took the template, and under four eyes the approval of one who
// changed the template does not count, another's does. And no one names a trigger as a
// pipeline's owner without the right the trigger's controller has.
func TestFourEyesRefusesWhoChangedTheTemplate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	alice, bob, _ := approvers(t, ns)
	// dave may change templates and approve steps.
	cluster.ServiceAccount(t, ns, "dave",
		rbacv1.PolicyRule{APIGroups: []string{"stepwise.dev"}, Resources: []string{"pipelinetemplates"}, Verbs: []string{"get", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"stepwise.dev"}, Resources: []string{"pipelines"}, Verbs: []string{"get", "list", v1alpha1.VerbApprove}},
		rbacv1.PolicyRule{APIGroups: []string{"stepwise.dev"}, Resources: []string{"approvals"}, Verbs: []string{"create"}})
	dave := person(t, ns, "dave")

	terminate := recordStep("terminate", nil)
	terminate.Approval = &v1alpha1.ApprovalPolicy{FourEyes: true}
	templates := func(a approver) stepwisev1alpha1.PipelineTemplateInterface {
		return a.stepwise.StepwiseV1alpha1().PipelineTemplates(ns)
	}
	created, err := alice.stepwise.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: ns, Annotations: map[string]string{v1alpha1.AnnotationEditedBy: bob.user}},
		Spec:       v1alpha1.PipelineTemplateSpec{Steps: []v1alpha1.Step{recordStep("cordon", nil), terminate}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, alice.user, created.Annotations[v1alpha1.AnnotationCreatedBy], "the API server records the template's creator")
	assert.NotContains(t, created.Annotations, v1alpha1.AnnotationEditedBy, "and no one its creator names as having changed it")

	changed, err := templates(dave).Patch(ctx, "retire-node", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/spec/params","value":[{"name":"note","default":"dave"}]}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, dave.user, changed.Annotations[v1alpha1.AnnotationEditedBy], "a change of the spec is recorded")
	assert.Equal(t, alice.user, changed.Annotations[v1alpha1.AnnotationCreatedBy])
	relabelled, err := templates(alice).Patch(ctx, "retire-node", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"team":"sre"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, dave.user, relabelled.Annotations[v1alpha1.AnnotationEditedBy], "a label is not a change of what runs")
	rewritten, err := templates(alice).Patch(ctx, "retire-node", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"stepwise.dev/edited-by":"someone-else"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, dave.user, rewritten.Annotations[v1alpha1.AnnotationEditedBy], "no one rewrites the record")
	dropped, err := templates(alice).Patch(ctx, "retire-node", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/annotations/stepwise.dev~1edited-by"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, dave.user, dropped.Annotations[v1alpha1.AnnotationEditedBy], "nor drops it")
	again, err := templates(alice).Patch(ctx, "retire-node", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/params/0/default","value":"alice"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, dave.user+"\n"+alice.user, again.Annotations[v1alpha1.AnnotationEditedBy], "each who changed it, once, in order")
	alicesEdit := again.Generation
	again, err = templates(dave).Patch(ctx, "retire-node", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/params/0/default","value":"dave again"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, dave.user+"\n"+alice.user, again.Annotations[v1alpha1.AnnotationEditedBy])

	// A run of the template keeps who made it, as when it took the template.
	pipeline := &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: ns},
		Spec:       v1alpha1.PipelineSpec{ServiceAccountName: "runner", TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}},
	}
	_, err = alice.stepwise.StepwiseV1alpha1().Pipelines(ns).Create(ctx, pipeline, metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitPipeline(t, ns, "retire", time.Minute, awaitingApproval("terminate"))
	require.NotNil(t, p.Status.Template)
	// The run keeps the authors of the template as it took it: the operator's cache may
	// not have had the last edits yet when the pipeline came (a loaded machine).
	editedBy := []string{dave.user, alice.user}
	if p.Status.Template.Generation < alicesEdit {
		editedBy = editedBy[:1]
	}
	assert.Equal(t, []v1alpha1.Authorship{{Kind: "PipelineTemplate", Name: "retire-node", UID: string(created.UID),
		CreatedBy: alice.user, EditedBy: editedBy}}, p.Status.Template.Authors)

	_, err = pipelineops.Decide(ctx, dave.kube, dave.stepwise, ns, "retire", "", v1alpha1.ApprovalApprove, "mine")
	require.NoError(t, err, "admitted: dave has the verb approve")
	p = waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool {
		w := stepOf(p, "terminate").Approval
		return w != nil && len(w.Decisions) == 1
	})
	rec := stepOf(p, "terminate").Approval.Decisions[0]
	assert.False(t, rec.Counted)
	assert.Equal(t, "four eyes: "+dave.user+" changed template retire-node, which the run took", rec.Ignored)
	waitEvent(t, ns, "retire", v1alpha1.ReasonApprovalIgnored, "changed template retire-node")
	_, err = pipelineops.Decide(ctx, bob.kube, bob.stepwise, ns, "retire", "", v1alpha1.ApprovalApprove, "")
	require.NoError(t, err)
	p = waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	assert.True(t, stepOf(p, "terminate").Approval.Decisions[1].Counted)

	// alice may create pipelines, not write a trigger's status: she cannot make one pass
	// for a trigger's (kubectl stepwise approve --trigger trusts that owner).
	forged := recordPipeline(ns, "forged", "runner", recordStep("cordon", nil))
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PipelineTrigger",
		Name: "retire", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}
	_, err = alice.stepwise.StepwiseV1alpha1().Pipelines(ns).Create(ctx, forged, metav1.CreateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), alice.user+" may not name a PipelineTrigger as an owner of pipeline forged")
	// The cluster admin (as the operator) may.
	_, err = stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, forged, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
}
