package k8s

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonConflict is the reason of an apply refused because another field manager owns
// fields the manifest sets.
const ReasonConflict = "Conflict"

// fieldConflict is an apply refused because other field managers own fields the manifest
// sets. Unforced, server-side apply never takes a field over, and retrying changes
// nothing: someone must choose between the manifest and the other manager. The message
// says which manager holds which field, and the ways on.
type fieldConflict struct {
	ref    ObjectRef
	causes []metav1.StatusCause
	err    error
}

func (e *fieldConflict) Error() string {
	fields := make([]string, len(e.causes))
	for i, c := range e.causes {
		// The API server words a cause as: conflict with "kubectl-edit" using apps/v1
		fields[i] = fmt.Sprintf("%s (managed by %s)", c.Field, strings.TrimPrefix(c.Message, "conflict with "))
	}
	return fmt.Sprintf("apply %s: fields the manifest sets are managed by another field manager: %s; "+
		"leave them out of the manifest, or set force: \"true\" on the step to take them over",
		e.ref.describe(), strings.Join(fields, ", "))
}

func (e *fieldConflict) Unwrap() error { return e.err }

// fieldConflicts returns the field manager conflicts that err reports, if any. A conflict
// without them is a write that raced another (a stale resourceVersion), which a retry
// fixes.
func fieldConflicts(err error) []metav1.StatusCause {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	s := status.Status()
	if s.Reason != metav1.StatusReasonConflict || s.Details == nil {
		return nil
	}
	var causes []metav1.StatusCause
	for _, c := range s.Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			causes = append(causes, c)
		}
	}
	return causes
}
