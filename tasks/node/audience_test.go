package node

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestAudienceReviewsEachNamespaceOnceAndBoundedly: within a hook call each kind is
// reviewed once per namespace, the pipeline's own never, a failed review names nothing,
// and past maxReviews the rest is counted unreviewed.
func TestAudienceReviewsEachNamespaceOnceAndBoundedly(t *testing.T) {
	client := fake.NewClientset()
	asked := grants(client, "pods apps", "poddisruptionbudgets *")
	a := newAudience(context.Background(), client, request(t, Drain{}, client, map[string]string{"node": "n1"}))

	for range 3 {
		assert.True(t, a.pods("ops"), "the pipeline's namespace")
		assert.True(t, a.pods("apps"))
		assert.False(t, a.pods("team"))
		assert.True(t, a.budgets("team"))
	}
	assert.Len(t, *asked, 3, "one review per kind and namespace, none for ops")
	for _, r := range *asked {
		assert.Equal(t, "get", r.Verb)
	}
	assert.Equal(t, "policy", (*asked)[2].Group)
	assert.Equal(t, "poddisruptionbudgets", (*asked)[2].Resource)

	for i := len(*asked); i < maxReviews+5; i++ {
		a.budgets(fmt.Sprintf("ns-%d", i))
	}
	assert.Len(t, *asked, maxReviews)
	assert.False(t, a.budgets("another"), "past the bound: counted, not named")

	failing := fake.NewClientset()
	failing.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	a = newAudience(context.Background(), failing, request(t, Drain{}, failing, map[string]string{"node": "n1"}))
	assert.False(t, a.pods("apps"))
	assert.True(t, a.pods("ops"))
}
