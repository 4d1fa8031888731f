package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// maxReviews bounds the access reviews of one hook call, which stays short: past it, what
// is left unreviewed is counted, not named.
const maxReviews = 32

// audience decides what a drain may name in the pipeline's status, which whoever may read
// the pipeline sees, while the drain acts on pods of every namespace: a pod or a
// PodDisruptionBudget of another namespace is named only when the pipeline's
// ServiceAccount may read that kind there (an access review through the step's
// impersonating client), and counted otherwise. Those of the pipeline's own namespace are
// always named. One audience serves one hook call, reviewing each namespace at most once.
type audience struct {
	ctx     context.Context
	client  kubernetes.Interface
	own     string
	allowed map[access]bool
}

type access struct{ group, resource, namespace string }

func newAudience(ctx context.Context, client kubernetes.Interface, req *executor.Request) *audience {
	return &audience{ctx: ctx, client: client, own: req.Pipeline.Namespace, allowed: map[access]bool{}}
}

// pods tells whether the pods of namespace may be named.
func (a *audience) pods(namespace string) bool { return a.may("", "pods", namespace) }

// deployments tells whether the Deployments of namespace may be named.
func (a *audience) deployments(namespace string) bool { return a.may("apps", "deployments", namespace) }

// budgets tells whether the PodDisruptionBudgets of namespace may be named.
func (a *audience) budgets(namespace string) bool {
	return a.may("policy", "poddisruptionbudgets", namespace)
}

func (a *audience) may(group, resource, namespace string) bool {
	if namespace == a.own {
		return true
	}
	key := access{group, resource, namespace}
	if allowed, ok := a.allowed[key]; ok {
		return allowed
	}
	if len(a.allowed) >= maxReviews {
		return false
	}
	review, err := a.client.AuthorizationV1().SelfSubjectAccessReviews().Create(a.ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "get", Group: group, Resource: resource}},
	}, metav1.CreateOptions{})
	// A review that fails names nothing: a count is never wrong, a name may be.
	allowed := err == nil && review.Status.Allowed
	a.allowed[key] = allowed
	return allowed
}

// unnamed counts the objects a status may not name, and their namespaces.
type unnamed struct {
	count      int
	namespaces []string
}

func (u *unnamed) add(namespace string) {
	u.count++
	if !slices.Contains(u.namespaces, namespace) {
		u.namespaces = append(u.namespaces, namespace)
	}
}

// of says them without a name: "3 pods in 2 other namespaces".
func (u unnamed) of(noun string) string {
	return plural(u.count, noun) + " in " + otherNamespaces(len(u.namespaces))
}

func otherNamespaces(n int) string {
	if n == 1 {
		return "another namespace"
	}
	return strconv.Itoa(n) + " other namespaces"
}

// withheld is an error told without the names its cause holds (an API error names its
// pod, a failed request its URL), keeping the cause for errors.As.
type withheld struct {
	msg string
	err error
}

func (w withheld) Error() string { return w.msg }
func (w withheld) Unwrap() error { return w.err }

// failure is err of an action on an object of another namespace: said as named when the
// object may be named, as unnamed with only the API's reason otherwise.
func failure(mayName bool, named, unnamed string, err error) error {
	if mayName {
		return fmt.Errorf("%s: %w", named, err)
	}
	reason := string(apierrors.ReasonForError(err))
	if reason == "" {
		reason = "the request failed"
	}
	return withheld{msg: unnamed + ": " + reason, err: err}
}

// namespaceOf is the namespace of a pod key, namespace/name.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}
