package k8s

import (
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// The executors of this package plan (contract.Planner) by reading, as the step's
// ServiceAccount, what their Create would read; k8s.apply also server-side applies with
// dryRun=All, which the API server checks (rights, admission, validation, field managers)
// and answers without storing anything. No plan writes anything else. What would fail or
// hold up Create is a warning, not an error: an error is for a plan that could not be made
// (bad parameters, as Create would refuse them, or an API server that did not answer).

// Actions of the rows of the plans of this package.
const (
	// actionCreate: the object does not exist; Create would make it.
	actionCreate = "create"
	// actionChange: Create would change the fields the note names.
	actionChange = "change"
	// actionUnchanged: Create would leave the object as it is.
	actionUnchanged = "unchanged"
	// actionApply: Create would apply onto the object, but what would change is not known:
	// the plan could not read it or dry-run the apply (a warning says why).
	actionApply = "apply"
	// actionRefuse: Create would refuse the object, and fail: it is not the step's own.
	actionRefuse = "refuse"
	// actionDelete: Create would prune the object.
	actionDelete = "delete"
	// actionSkip: Create would leave an object of its inventory that is no longer its own.
	actionSkip = "skip"
	// actionWait: k8s.wait would wait for the object.
	actionWait = "wait"
	// actionScale: k8s.scale would set the workload's count.
	actionScale = "scale"
)

// planItem is the row of a plan for the object kind ns/name (name alone when
// cluster-scoped).
func planItem(kind, ns, name, action, note string) contract.PlanItem {
	if ns != "" {
		name = ns + "/" + name
	}
	return contract.PlanItem{Kind: kind, Name: name, Action: action, Note: note}
}

// failure is the warning of a plan that err would fail or hold up Create: the reason the
// step's condition would show, then the error ("Forbidden: get Deployment shop/web: …").
func failure(err error) string {
	return executor.ReasonFor(err) + ": " + err.Error()
}

// joinNotes joins the non-empty notes of a row.
func joinNotes(notes ...string) string {
	var out string
	for _, n := range notes {
		switch {
		case n == "":
		case out == "":
			out = n
		default:
			out += "; " + n
		}
	}
	return out
}
