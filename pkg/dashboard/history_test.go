package dashboard

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

func historyRecord(ns, pipeline string, state v1alpha1.ArchiveState, steps ...v1alpha1.StepStatus) *historyv1alpha1.PipelineRecord {
	return &historyv1alpha1.PipelineRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: historyv1alpha1.RecordName(pipeline, "3f2a9c01-aaaa", 1, state)},
		Pipeline:   historyv1alpha1.PipelineReference{Name: pipeline, UID: "3f2a9c01-aaaa", Generation: 1},
		State:      state, Phase: v1alpha1.PipelinePhase(state), Trigger: "retire", Object: "n1",
		Finished: metav1.NewTime(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)),
		Spec:     v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{{Name: "cordon"}, {Name: "drain"}, {Name: "delete"}}},
		Status:   v1alpha1.PipelineStatus{Steps: steps},
	}
}

func TestListHistory(t *testing.T) {
	f := newFixture(t, fixtureOptions{objects: []runtime.Object{
		historyRecord("ops", "retire-n1", v1alpha1.ArchiveFailed,
			v1alpha1.StepStatus{Name: "cordon", Phase: v1alpha1.StepSucceeded}, v1alpha1.StepStatus{Name: "drain", Phase: v1alpha1.StepFailed}),
	}})
	var asked metav1.ListOptions
	f.client.PrependReactor("list", "pipelinerecords", func(a clienttesting.Action) (bool, runtime.Object, error) {
		asked = a.(clienttesting.ListActionImpl).ListOptions
		return false, nil, nil
	})
	rec := f.get("/api/history?namespace=ops&continue=abc")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, int64(historyPage), asked.Limit)
	assert.Equal(t, "abc", asked.Continue, "the next page is the API's")
	got := decode[historyList](t, rec)
	require.Len(t, got.Items, 1)
	it := got.Items[0]
	assert.Equal(t, "retire-n1", it.Pipeline)
	assert.Equal(t, v1alpha1.ArchiveFailed, it.State)
	assert.Equal(t, 3, it.Steps)
	assert.Equal(t, 1, it.Succeeded)
	assert.Equal(t, "drain", it.FailedStep)
}

func TestListHistorySaysWhatIsWrong(t *testing.T) {
	gr := schema.GroupResource{Group: "history.stepwise.dev", Resource: "pipelinerecords"}
	tests := []struct {
		name     string
		err      error
		wantCode int
		wantText string
	}{
		{"not installed", apierrors.NewNotFound(gr, ""), http.StatusNotFound, "the history API is not installed"},
		{"not allowed", apierrors.NewForbidden(gr, "", nil), http.StatusForbidden, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{setup: func(c *fake.Clientset, _ *kubefake.Clientset) {
				c.PrependReactor("list", "pipelinerecords", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tt.err })
			}})
			rec := f.get("/api/history")
			assert.Equal(t, tt.wantCode, rec.Code)
			assert.Contains(t, rec.Body.String(), tt.wantText)
		})
	}
}
