package pipelineops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// WhoAmI is the user the API server authenticates the caller as (a SelfSubjectReview):
// what spec.pause.by and spec.resume.by must say, which the install's admission policy
// checks.
func WhoAmI(ctx context.Context, kube kubernetes.Interface) (string, error) {
	who, err := whoAmI(ctx, kube)
	return who.user, err
}

// identity is a user and their groups as the API server authenticated them.
type identity struct {
	user   string
	groups []string
}

func whoAmI(ctx context.Context, kube kubernetes.Interface) (identity, error) {
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return identity{}, fmt.Errorf("ask the API server who you are (SelfSubjectReview): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return identity{}, errors.New("the API server did not say who you are")
	}
	return identity{user: review.Status.UserInfo.Username, groups: review.Status.UserInfo.Groups}, nil
}

// PauseTrigger pauses trigger ns/name in the caller's name, for reason: it starts nothing
// until resumed; its running pipelines go on. One merge patch of spec.pause.
func PauseTrigger(ctx context.Context, kube kubernetes.Interface, client clientset.Interface, ns, name, reason string) (*v1alpha1.PipelineTrigger, error) {
	who, err := WhoAmI(ctx, kube)
	if err != nil {
		return nil, err
	}
	return patchTrigger(ctx, client, ns, name, "pause", map[string]any{
		"pause": v1alpha1.TriggerPause{By: who, Reason: reason},
	})
}

// ResumeTrigger lifts a pause of trigger ns/name and resumes it in the caller's name: its
// failure budget counts from zero. now makes the resume's ID (a new one each time).
func ResumeTrigger(ctx context.Context, kube kubernetes.Interface, client clientset.Interface, ns, name string, now time.Time) (*v1alpha1.PipelineTrigger, error) {
	who, err := WhoAmI(ctx, kube)
	if err != nil {
		return nil, err
	}
	return patchTrigger(ctx, client, ns, name, "resume", map[string]any{
		"pause":  nil,
		"resume": v1alpha1.TriggerResume{By: who, ID: now.UTC().Format(time.RFC3339Nano)},
	})
}

// patchTrigger merges spec into trigger ns/name's spec, for what (pause, resume).
func patchTrigger(ctx context.Context, client clientset.Interface, ns, name, what string, spec map[string]any) (*v1alpha1.PipelineTrigger, error) {
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return nil, fmt.Errorf("encode patch: %w", err)
	}
	t, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s trigger %s/%s: %w", what, ns, name, err)
	}
	return t, nil
}
