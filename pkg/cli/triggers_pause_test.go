package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// asUser makes the fake API server authenticate the caller as user.
func asUser(kube *kubefake.Clientset, user string) {
	kube.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: user}}}, nil
	})
}

func TestTriggersPauseAndResumeInYourName(t *testing.T) {
	trg := &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "demo"}}
	c, sw := fakeClients(trg)
	asUser(c.Kube.(*kubefake.Clientset), "alice@example.com")

	code, out, errOut := run(t, c, "triggers", "pause", "retire", "--reason", "INC-42")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "trigger demo/retire paused by alice@example.com\n", out)
	got, err := sw.StepwiseV1alpha1().PipelineTriggers("demo").Get(context.Background(), "retire", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, &v1alpha1.TriggerPause{By: "alice@example.com", Reason: "INC-42"}, got.Spec.Pause)

	code, out, errOut = run(t, c, "triggers", "resume", "retire")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "trigger demo/retire resumed by alice@example.com\n", out)
	got, err = sw.StepwiseV1alpha1().PipelineTriggers("demo").Get(context.Background(), "retire", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, got.Spec.Pause, "the pause is lifted")
	require.NotNil(t, got.Spec.Resume)
	assert.Equal(t, "alice@example.com", got.Spec.Resume.By)
	first := got.Spec.Resume.ID

	run(t, c, "triggers", "resume", "retire")
	got, err = sw.StepwiseV1alpha1().PipelineTriggers("demo").Get(context.Background(), "retire", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, first, got.Spec.Resume.ID, "each resume is a new one")

	code, _, errOut = run(t, c, "triggers", "pause", "nope")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, "pause trigger demo/nope")
}
