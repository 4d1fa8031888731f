package k8s

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Apply is k8s.apply.
//
// Parameter manifest holds one or more YAML (or JSON) documents, each a whole object with
// apiVersion, kind and metadata.name; empty documents are skipped. Namespaced objects
// without a namespace go to the pipeline's namespace; cluster-scoped objects stay
// cluster-scoped.
//
// # Ownership
//
// Every object applied gets the owner labels stepwise.dev/pipeline=PIPELINE,
// stepwise.dev/pipeline-uid=UID and stepwise.dev/step=STEP. An object is the step's own
// when those labels name its pipeline, that pipeline's UID (so that a Pipeline deleted and
// created again under the same name, or one of the same name in another namespace, is
// another owner) and the step. An object of the step's own inventory that has the name
// labels but no UID label was applied before the UID label existed, and is its own too.
//
// Before applying anything, Create reads every object of the manifest. One that exists and
// is not the step's own (another pipeline's or step's, or made by hand) fails the step at
// once, with reason NotOwned and nothing applied, unless parameter force is "true": then
// the step takes it over, relabels it, and from then on owns it (its teardown deletes it).
// A Pipeline's ServiceAccount therefore needs get as well as patch (and create) on what it
// applies, and delete for the teardown and pruning.
//
// Create server-side applies every object, in order, as field manager "stepwise", forced
// only when force is "true". Unforced, a field that another field manager owns (say,
// kubectl scale's .spec.replicas) is not taken over: the step fails with reason Conflict,
// naming each field and its manager. Every step of every pipeline applies as that one
// field manager, so server-side apply cannot tell two pipelines apart: the owner labels do.
//
// # Inventory
//
// Create reports the output "objects", the step's inventory: the objects of the manifest,
// comma-separated, each as GROUP/VERSION/KIND/NAMESPACE/NAME, where the group is empty for
// the core group and the namespace empty for cluster-scoped objects:
//
//	apps/v1/Deployment/shop/web,/v1/Service/shop/web,rbac.authorization.k8s.io/v1/ClusterRole//viewer
//
// At a re-run the step sees its previous inventory. Create applies the new manifest first,
// then prunes: it deletes, last applied first, the objects of the previous inventory that
// the manifest no longer has (compared by group, kind, namespace and name: a new version of
// the same object is not pruned), without waiting for them to be gone. It deletes only
// what is still its own, and leaves (and drops from the inventory) an object whose labels
// now name another owner, saying so in its message. A manifest edited from web to web2
// thus removes web at the re-run, and the teardown deletes web2.
//
// The inventory must fit the 4 KiB a step keeps in its outputs. Until the old objects are
// pruned, a failure must leave both the old and the new in it, so the two together must
// fit; a manifest for which they do not fails at once, before anything is applied (split
// it over several steps). When applying an object or pruning fails, what was applied is
// recorded first (with the previous inventory), so that the teardown deletes it; the next
// call applies again and reports the failure.
//
// # Teardown
//
// Delete deletes the objects of its own "objects" output that are still its own, last
// applied first, with foreground propagation (dependents, such as a Deployment's Pods, go
// first), and waits until every one is gone. It leaves an object whose labels name another
// owner, and its message says which; that is no error. A step whose Create never applied
// anything has nothing to delete.
type Apply struct{ executor.Base }

func (Apply) Name() string { return "k8s.apply" }

// ObjectsOutput is the output of k8s.apply that lists what it applied: its inventory.
const ObjectsOutput = "objects"

// deletePoll is how often the teardown looks again at objects that are not gone yet.
const deletePoll = time.Second

// recordPoll is how soon Create runs again after it recorded a partial apply.
const recordPoll = 100 * time.Millisecond

// messageSize bounds the messages of k8s.apply, which may list objects.
const messageSize = 512

func (Apply) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, restMapper, err := clients(req)
	if err != nil {
		return contract.Result{}, err
	}
	// The engine checked the parameters against Describe: force is a bool, false unless set.
	force := req.Bool("force")
	me, err := stepOwner(req)
	if err != nil {
		return contract.Result{}, err
	}
	objs, err := parseManifest(req.String("manifest"))
	if err != nil {
		return contract.Result{}, err
	}
	m := &mapper{m: restMapper}
	planned, err := plan(req, m, me, objs, false)
	if err != nil {
		return contract.Result{}, err
	}
	refs := refsOf(planned)
	// What an earlier run, or call, of the step recorded; a malformed value is ours, and is
	// replaced.
	previous, _ := ParseObjectRefs(req.Outputs[req.Step][ObjectsOutput])
	if err := checkInventorySize(refs, previous); err != nil {
		return contract.Result{}, err
	}
	takeovers, err := claim(ctx, client, me, planned, previous, force)
	if err != nil {
		return contract.Result{}, err
	}

	for i, p := range planned {
		_, err := resourceFor(client, p.mapping, p.ref.Namespace).Apply(ctx, p.ref.Name, p.obj, applyOptions(force))
		if err != nil {
			return recordOrFail(previous, refs[:i], fmt.Sprintf("applied %d of %d objects", i, len(planned)), applyError(p.ref, err))
		}
	}
	applied := fmt.Sprintf("applied %d %s", len(refs), plural(len(refs), "object"))
	pruned, left, err := prune(ctx, client, m, me, removedFrom(previous, refs))
	if err != nil {
		return recordOrFail(previous, refs, applied, err)
	}

	message := []string{applied}
	if len(takeovers) > 0 {
		message = append(message, "took over "+strings.Join(takeovers, ", "))
	}
	if len(pruned) > 0 {
		message = append(message, fmt.Sprintf("pruned %d %s: %s", len(pruned), plural(len(pruned), "object"), strings.Join(pruned, ", ")))
	}
	if len(left) > 0 {
		message = append(message, leftMessage(left))
	}
	return contract.DoneWithOutputs(contract.Truncate(strings.Join(message, "; "), messageSize),
		map[string]string{ObjectsOutput: FormatObjectRefs(refs)}), nil
}

// applyOptions are the options of Create's server-side applies (Plan's are the same, dry
// run): as field manager stepwise, taking fields over from other managers only when forced.
func applyOptions(force bool) metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: force}
}

// recordOrFail ends a Create that failed with err after it applied the objects applied
// (done says how far it got). Objects the inventory does not list yet are recorded first,
// with the previous inventory (whose objects may not all be pruned), so that the teardown
// deletes them; the next call applies them again (a no-op) and reports the failure.
func recordOrFail(previous, applied []ObjectRef, done string, err error) (contract.Result, error) {
	if !unrecorded(applied, previous) {
		return contract.Result{}, err
	}
	return contract.Result{
		RequeueAfter: recordPoll,
		Outputs:      map[string]string{ObjectsOutput: FormatObjectRefs(union(previous, applied))},
		Message:      contract.Truncate(fmt.Sprintf("%s, then: %v", done, err), messageSize),
	}, nil
}

// applyError wraps the failure to apply ref. Objects the API server refuses as invalid
// stay invalid whatever the retries, and fields another manager owns stay its own until
// someone decides, so those errors are permanent.
func applyError(ref ObjectRef, err error) error {
	if causes := fieldConflicts(err); len(causes) > 0 {
		return contract.Permanent(ReasonConflict, &fieldConflict{ref: ref, causes: causes, err: err})
	}
	err = fmt.Errorf("apply %s: %w", ref.describe(), err)
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return contract.Permanent(string(apierrors.ReasonForError(err)), err)
	}
	return err
}

func (Apply) Delete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	raw := req.Outputs[req.Step][ObjectsOutput]
	refs, err := ParseObjectRefs(raw)
	if err != nil {
		return contract.Result{}, contract.Permanent("InvalidOutput", fmt.Errorf("output %q of step %s: %w", ObjectsOutput, req.Step, err))
	}
	if len(refs) == 0 {
		return contract.Done("nothing was applied"), nil
	}
	client, restMapper, err := clients(req)
	if err != nil {
		return contract.Result{}, err
	}
	// Without a UID in the request, only objects labelled before the UID label match.
	me := owner{pipeline: req.Pipeline.Name, uid: req.Pipeline.UID, step: req.Step}
	m := &mapper{m: restMapper}
	var pending, left []string
	for i := len(refs) - 1; i >= 0; i-- {
		ref := refs[i]
		what, holder, err := remove(ctx, client, m, me, ref)
		if err != nil {
			return contract.Result{}, fmt.Errorf("delete %s: %w", ref.describe(), err)
		}
		switch what {
		case removalDeleting:
			pending = append(pending, ref.describe())
		case removalNotOurs:
			left = append(left, notOurs(ref, holder))
		}
	}
	var message string
	if len(pending) == 0 {
		deleted := len(refs) - len(left)
		message = fmt.Sprintf("deleted %d %s", deleted, plural(deleted, "object"))
	} else {
		message = fmt.Sprintf("waiting for %d %s to be gone: %s", len(pending), plural(len(pending), "object"), strings.Join(pending, ", "))
	}
	if len(left) > 0 {
		message += "; " + leftMessage(left)
	}
	message = contract.Truncate(message, messageSize)
	if len(pending) == 0 {
		return contract.Done(message), nil
	}
	return contract.Wait(deletePoll, message), nil
}

// Plan tells what Create would do, changing nothing. It parses the manifest and labels
// its objects as Create does, and reads each object as Create does before applying
// anything. One that is not the step's own is a row "refuse" and a warning NotOwned
// (unless force). Every other one it server-side applies as Create would (field manager
// stepwise, forced only when force is "true") with dryRun=All: the API server checks the
// ServiceAccount's rights, admission, validation and the field managers, and answers with
// the object as it would store it. A row says "create" for an object that does not exist,
// "unchanged" when the answer is the object as it is, else "change" with the fields that
// differ (changedPaths). It then reads what Create would prune: "delete" for what is still
// the step's, "skip" for what is no longer.
//
// What would fail Create is a warning with a row, not an error: a right the
// ServiceAccount lacks (Forbidden), a field another manager owns (Conflict), an invalid
// object, a kind the API server does not serve or a namespace that does not exist now
// (an earlier step may install or create them). Its output is the inventory Create would
// output.
func (Apply) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	client, restMapper, err := clients(req)
	if err != nil {
		return contract.Plan{}, err
	}
	force := req.Bool("force")
	me, err := stepOwner(req)
	if err != nil {
		return contract.Plan{}, err
	}
	objs, err := parseManifest(req.String("manifest"))
	if err != nil {
		return contract.Plan{}, err
	}
	m := &mapper{m: restMapper}
	planned, err := plan(req, m, me, objs, true)
	if err != nil {
		return contract.Plan{}, err
	}
	refs := refsOf(planned)
	previous, _ := ParseObjectRefs(req.Outputs[req.Step][ObjectsOutput])
	if err := checkInventorySize(refs, previous); err != nil {
		return contract.Plan{}, err
	}

	pl := &applyPlan{namespaces: map[string]bool{}}
	for _, p := range planned {
		if err := pl.apply(ctx, client, me, p, previous, force); err != nil {
			return contract.Plan{}, err
		}
	}
	stale := removedFrom(previous, refs)
	for i := len(stale) - 1; i >= 0; i-- { // last applied first, as prune
		if err := pl.prune(ctx, client, m, me, stale[i]); err != nil {
			return contract.Plan{}, err
		}
	}
	return contract.Plan{
		Summary:  pl.summary(),
		Details:  pl.details,
		Warnings: pl.warnings,
		Outputs:  map[string]string{ObjectsOutput: FormatObjectRefs(refs)},
	}, nil
}

// Describe documents k8s.apply for the executor catalogue. The engine checks a step's
// parameters against what each executor declares here before any hook: the declarations
// are complete (every one typed), so a parameter not declared is refused.
func (Apply) Describe() contract.Description {
	return contract.Description{
		Description: "Server-side applies YAML documents (field manager stepwise) and lists them in the output objects; " +
			"a re-run prunes the listed objects the manifest no longer has, and teardown deletes the listed objects, " +
			"last first. Both delete only objects whose labels still name the step (stepwise.dev/pipeline, " +
			"stepwise.dev/pipeline-uid, stepwise.dev/step) and leave the others.",
		// A re-run applies the new manifest over the last run's objects and prunes the
		// rest (see Apply): there is no need to tear the last run down first.
		UpdatesInPlace: true,
		Parameters: []contract.Parameter{
			{
				Name:        "manifest",
				Description: "One or more YAML documents; namespaced objects without a namespace go to the pipeline's namespace. References such as $(steps.s.outputs.k) are substituted inside its values, never as YAML.",
				Required:    true,
				Type:        contract.ParamYAML,
			},
			{
				Name:    "force",
				Type:    contract.ParamBool,
				Default: "false",
				Description: "\"true\" to take over objects of the manifest that exist and are not this step's " +
					"(another pipeline's, or made by hand), and fields another field manager owns; teardown then deletes " +
					"those objects. Default false: such an object fails the step with reason NotOwned, such a field with " +
					"reason Conflict.",
			},
		},
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

var (
	_ executor.TaskExecutor = Apply{}
	_ executor.Planner      = Apply{}
)
