package pipelineops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// ErrRejectionWithoutComment: a rejection says why, since it is the failed step's message.
var ErrRejectionWithoutComment = errors.New("a rejection needs a comment: it is the step's failure message")

// CheckComment is the rule on a decision's comment, which every client checks before it
// asks anything: a rejection has one, and it fits an Approval.
func CheckComment(decision v1alpha1.ApprovalDecision, comment string) error {
	switch {
	case decision == v1alpha1.ApprovalReject && strings.TrimSpace(comment) == "":
		return ErrRejectionWithoutComment
	case len(comment) > v1alpha1.MaxApprovalCommentLength:
		return fmt.Errorf("comment is %d bytes: at most %d", len(comment), v1alpha1.MaxApprovalCommentLength)
	}
	return nil
}

// Decide records the caller's decision (approve or reject, with a comment) on a step of
// pipeline ns/name that waits for approval: step, or the one step that waits when step is
// empty. The Approval names the caller as the API server authenticates them (a
// SelfSubjectReview); the install's admission policy refuses any other name, and a caller
// without the verb approve on the pipeline.
func Decide(ctx context.Context, kube kubernetes.Interface, client clientset.Interface, ns, name, step string,
	decision v1alpha1.ApprovalDecision, comment string) (*v1alpha1.Approval, error) {
	if err := CheckComment(decision, comment); err != nil {
		return nil, err
	}
	p, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pipeline %s/%s: %w", ns, name, err)
	}
	waiting, err := waitingStep(p, step)
	if err != nil {
		return nil, err
	}
	who, err := whoAmI(ctx, kube)
	if err != nil {
		return nil, err
	}
	return createApproval(ctx, client, p, waiting, who, decision, comment)
}

// DecideTrigger records the caller's decision on every step that waits for approval in
// the pipelines trigger ns/name controls (PipelineTrigger.Controls), one Approval each:
// those with the trigger's UID label, which only the trigger's controller may write (the
// install's admission policy), never those with its name label alone. It returns those it
// made, and the names of the pipelines with a step that waits which carry the UID label
// but name another controller, left to be decided one by one, by name. The first failure
// stops it.
func DecideTrigger(ctx context.Context, kube kubernetes.Interface, client clientset.Interface, ns, name string,
	decision v1alpha1.ApprovalDecision, comment string) (made []*v1alpha1.Approval, notControlled []string, err error) {
	if err := CheckComment(decision, comment); err != nil {
		return nil, nil, err
	}
	t, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("get trigger %s/%s: %w", ns, name, err)
	}
	list, err := client.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{
		LabelSelector: v1alpha1.LabelTriggerUID + "=" + string(t.UID)})
	if err != nil {
		return nil, nil, fmt.Errorf("list the pipelines of trigger %s/%s: %w", ns, name, err)
	}
	who, err := whoAmI(ctx, kube)
	if err != nil {
		return nil, nil, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		waiting := p.AwaitingApproval()
		if !t.Controls(p) {
			if len(waiting) > 0 {
				notControlled = append(notControlled, p.Name)
			}
			continue
		}
		for _, s := range waiting {
			a, err := createApproval(ctx, client, p, s, who, decision, comment)
			if err != nil {
				return made, notControlled, err
			}
			made = append(made, a)
		}
	}
	return made, notControlled, nil
}

// waitingStep is the step of p named step that waits for approval, or the only one that
// waits when step is empty.
func waitingStep(p *v1alpha1.Pipeline, step string) (v1alpha1.StepStatus, error) {
	waiting := p.AwaitingApproval()
	if step == "" {
		switch len(waiting) {
		case 1:
			return waiting[0], nil
		case 0:
			return v1alpha1.StepStatus{}, fmt.Errorf("no step of pipeline %s/%s waits for approval", p.Namespace, p.Name)
		}
		var names []string
		for _, s := range waiting {
			names = append(names, s.Name)
		}
		return v1alpha1.StepStatus{}, fmt.Errorf("steps %s of pipeline %s/%s wait for approval: name one", strings.Join(names, ", "), p.Namespace, p.Name)
	}
	for _, s := range waiting {
		if s.Name == step {
			return s, nil
		}
	}
	return v1alpha1.StepStatus{}, fmt.Errorf("step %s of pipeline %s/%s does not wait for approval", step, p.Namespace, p.Name)
}

// createApproval creates the Approval of who's decision on step s of p. It is owned by the
// pipeline, and goes with it; the pipeline's status keeps the record.
func createApproval(ctx context.Context, client clientset.Interface, p *v1alpha1.Pipeline, s v1alpha1.StepStatus,
	who identity, decision v1alpha1.ApprovalDecision, comment string) (*v1alpha1.Approval, error) {
	a := &v1alpha1.Approval{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: approvalNamePrefix(p.Name, s.Name),
			Namespace:    p.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Pipeline", Name: p.Name, UID: p.UID,
			}},
		},
		Spec: v1alpha1.ApprovalSpec{
			Pipeline: p.Name, Step: s.Name, Request: s.Approval.Request, Decision: decision,
			Comment: comment, User: who.user, Groups: who.groups,
		},
	}
	made, err := client.StepwiseV1alpha1().Approvals(p.Namespace).Create(ctx, a, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s step %s of pipeline %s/%s: %w", strings.ToLower(string(decision)), s.Name, p.Namespace, p.Name, err)
	}
	return made, nil
}

// approvalNamePrefix is the generateName of an Approval: the pipeline's and the step's
// names, cut so that the API server's random suffix fits.
func approvalNamePrefix(pipeline, step string) string {
	prefix := pipeline + "-" + step
	if len(prefix) > 57 {
		prefix = strings.TrimRight(prefix[:57], "-.")
	}
	return prefix + "-"
}
