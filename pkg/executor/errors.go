package executor

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// ReasonFor is the CamelCase reason a step's condition shows for err: the executor's
// own, else the Kubernetes API's (such as "Forbidden"), else a generic one.
func ReasonFor(err error) string {
	if reason := contract.OwnReason(err); reason != "" {
		return contract.NormalizeReason(reason)
	}
	if reason := apierrors.ReasonForError(err); reason != "" && reason != "Unknown" {
		return string(reason)
	}
	return contract.ReasonHookFailed
}
