package k8s

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// removal is what became of an object of the inventory that the step set out to delete,
// at teardown or when pruning.
type removal int

const (
	// removalGone: the object is not there, or its kind is no longer served.
	removalGone removal = iota
	// removalDeleting: its deletion was asked for, now or before; it may still be there.
	removalDeleting
	// removalNotOurs: left alone, for its labels name another owner.
	removalNotOurs
)

// remove deletes the object ref names if its owner labels still name the step me; else it
// leaves it, and returns who they name. The inventory lists every object it is given, so
// one labelled before the UID label is the step's (see owner.owns). It deletes with
// foreground propagation, so that dependents (a Deployment's Pods) go first, and with the
// UID it read as a precondition, so that it never deletes an object created under the
// same name since.
func remove(ctx context.Context, client dynamic.Interface, m *mapper, me owner, ref ObjectRef) (removal, owner, error) {
	mapping, err := m.mapping(ref.GroupVersionKind)
	if meta.IsNoMatchError(err) {
		return removalGone, owner{}, nil // The kind is no longer served (its CRD went), and its objects with it.
	}
	if err != nil {
		return 0, owner{}, fmt.Errorf("look up its kind: %w", err)
	}
	resource := resourceFor(client, mapping, ref.Namespace)
	obj, err := resource.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return removalGone, owner{}, nil
	}
	if err != nil {
		return 0, owner{}, fmt.Errorf("get: %w", err)
	}
	if holder := ownerOf(obj); !me.owns(holder, true) {
		return removalNotOurs, holder, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return removalDeleting, owner{}, nil
	}
	uid := obj.GetUID()
	propagation := metav1.DeletePropagationForeground
	err = resource.Delete(ctx, ref.Name, metav1.DeleteOptions{
		PropagationPolicy: &propagation,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	switch {
	case apierrors.IsNotFound(err):
		return removalGone, owner{}, nil
	case err == nil, apierrors.IsConflict(err): // a conflict: replaced since the read; look again later
		return removalDeleting, owner{}, nil
	default:
		return 0, owner{}, err
	}
}
