package k8s

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"
)

// prune deletes the objects of the previous inventory that the manifest no longer has
// (stale), last applied first, as Flux's inventory does: at a re-run, a manifest that
// renames web to web2 removes web. Like the teardown, it deletes only what is still the
// step's (me) and leaves the rest, which it reports in left. Unlike the teardown, it does
// not wait for the objects to be gone: a deletion once asked for goes on by itself, and the
// step's new objects are up already. It returns what it pruned and what it left, each as
// the messages name them; on an error, what it did so far and the error.
func prune(ctx context.Context, client dynamic.Interface, m *mapper, me owner, stale []ObjectRef) (pruned, left []string, err error) {
	for i := len(stale) - 1; i >= 0; i-- {
		ref := stale[i]
		what, holder, removeErr := remove(ctx, client, m, me, ref)
		if removeErr != nil {
			return pruned, left, fmt.Errorf("prune %s: %w", ref.describe(), removeErr)
		}
		switch what {
		case removalDeleting:
			pruned = append(pruned, ref.describe())
		case removalNotOurs:
			left = append(left, notOurs(ref, holder))
		}
	}
	return pruned, left, nil
}
