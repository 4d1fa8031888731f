package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// lostWithTheNamespace tells whether a teardown failed because what it needs went with
// its namespace: the RoleBindings of its ServiceAccount (Forbidden, Unauthorized), its
// Secret, or the plugin of its executor. In a namespace that stays it waits for a retry.
func lostWithTheNamespace(reason string) bool {
	switch reason {
	case "Forbidden", "Unauthorized", "SecretNotFound", contract.ReasonUnknownExecutor:
		return true
	}
	return false
}

// skipTeardown skips the teardown of s when it cannot run because its namespace is being
// deleted, so that a pipeline never holds its namespace in Terminating for ever (Flux skips
// the uninstall of a release whose ServiceAccount is gone the same way). It reports
// whether it did, with a Warning Event saying what was left behind.
func (ps *pipelineSync) skipTeardown(s *v1alpha1.StepStatus, err error) bool {
	reason := executor.ReasonFor(err)
	if !lostWithTheNamespace(reason) || !ps.namespaceGoing() {
		return false
	}
	s.Phase = v1alpha1.StepDeleted
	s.NextAttemptTime = nil
	s.CompletionTime = ps.timeNow()
	s.Message = contract.Truncate(fmt.Sprintf("teardown skipped: namespace %s is being deleted and the teardown cannot run (%s: %v); what the step created outside the namespace is left",
		ps.p.Namespace, reason, err), v1alpha1.MaxStepMessageLength)
	s.Reason = reasonTeardownSkipped
	ps.record(teardownSkipped(s))
	return true
}

// namespaceGoing tells whether the pipeline's namespace is being deleted, or gone.
func (ps *pipelineSync) namespaceGoing() bool {
	if ps.env.namespaces == nil {
		return false
	}
	ns, err := ps.env.namespaces.Get(ps.p.Namespace)
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating)
}
