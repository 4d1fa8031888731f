package accessreview

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// ServiceAccount is the ServiceAccount an object acts as.
type ServiceAccount struct {
	Namespace, Name string
}

// User is the user name the API server gives the ServiceAccount.
func (sa ServiceAccount) User() string {
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
}

// Groups are the groups the API server gives every ServiceAccount token of its namespace.
func (sa ServiceAccount) Groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"}
}

func (sa ServiceAccount) String() string { return sa.Namespace + "/" + sa.Name }

// Review asks whether sa may do what attrs say, as the API server would authorize its
// request: with the groups the API server gives every ServiceAccount token.
func Review(ctx context.Context, kube kubernetes.Interface, sa ServiceAccount, attrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               sa.User(),
		Groups:             sa.Groups(),
		ResourceAttributes: &attrs,
	}}
	got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		what := schema.GroupResource{Group: attrs.Group, Resource: attrs.Resource}.String()
		return false, fmt.Errorf("review whether ServiceAccount %s may %s %s: %w", sa, attrs.Verb, what, err)
	}
	return got.Status.Allowed && !got.Status.Denied, nil
}
