package k8s

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// removalDue: its labels name the step and no deletion is under way: remove deletes
	// it (examine only tells).
	removalDue
)

// remove deletes the object ref names if its owner labels still name the step me; else it
// leaves it, and returns who they name. The inventory lists every object it is given, so
// one labelled before the UID label is the step's (see owner.owns). It deletes with
// foreground propagation, so that dependents (a Deployment's Pods) go first, and with the
// UID it read as a precondition, so that it never deletes an object created under the
// same name since.
func remove(ctx context.Context, client dynamic.Interface, m *mapper, me owner, ref ObjectRef) (removal, owner, error) {
	e, err := examine(ctx, client, m, me, ref)
	if err != nil || e.what != removalDue {
		return e.what, e.holder, err
	}
	propagation := metav1.DeletePropagationForeground
	err = e.resource.Delete(ctx, ref.Name, metav1.DeleteOptions{
		PropagationPolicy: &propagation,
		Preconditions:     &metav1.Preconditions{UID: &e.uid},
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

// examined is what remove found of an object before deleting it.
type examined struct {
	what removal
	// holder is who its labels name, when it is removalNotOurs.
	holder owner
	// resource and uid reach it, when it is removalDue.
	resource dynamic.ResourceInterface
	uid      types.UID
}

// examine reads the object ref names and tells what remove does with it, deleting
// nothing: the first half of remove, and all of a plan's.
func examine(ctx context.Context, client dynamic.Interface, m *mapper, me owner, ref ObjectRef) (examined, error) {
	mapping, err := m.mapping(ref.GroupVersionKind)
	if meta.IsNoMatchError(err) {
		return examined{what: removalGone}, nil // The kind is no longer served (its CRD went), and its objects with it.
	}
	if err != nil {
		return examined{}, fmt.Errorf("look up its kind: %w", err)
	}
	resource := resourceFor(client, mapping, ref.Namespace)
	obj, err := resource.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return examined{what: removalGone}, nil
	}
	if err != nil {
		return examined{}, fmt.Errorf("get: %w", err)
	}
	if holder := ownerOf(obj); !me.owns(holder, true) {
		return examined{what: removalNotOurs, holder: holder}, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return examined{what: removalDeleting}, nil
	}
	return examined{what: removalDue, resource: resource, uid: obj.GetUID()}, nil
}
