package hostile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/controller"
)

const (
	baitLabel = "hostile.stepwise.dev/bait"
	// teardownGrace is how long deleted pipelines may take to run their teardown before
	// they get the Orphan policy.
	teardownGrace = 15 * time.Second
)

// tenant is namespace A of the suite, its identities and the bait its triggers match.
type tenant struct {
	env     Env
	schemas Schemas
	// as is a client that acts as the tenant (impersonation); admin acts as the cluster's
	// administrator, to observe and to clean up.
	as, admin dynamic.Interface
	// foreignBait is a bait ConfigMap in the canary's namespace: no trigger of the tenant's
	// may match it.
	foreignBait types.UID
}

// newTenant makes namespace A (the tenant) and B (the canary's), the ServiceAccounts of A,
// and bait: ConfigMaps in A and B, and Nodes, labelled for the triggers.
func newTenant(t *testing.T, schemas Schemas) *tenant {
	t.Helper()
	ctx := t.Context()
	a, b := cluster.CreateNamespace(t), cluster.CreateNamespace(t)
	env := Env{Namespace: a, Foreign: b, BaitLabel: baitLabel, Runner: "runner", Watcher: "watcher", Tenant: "tenant"}
	// The tenant is a ServiceAccount: its user and groups as the API server makes them.
	env.TenantUser = "system:serviceaccount:" + a + ":" + env.Tenant
	env.TenantGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + a, "system:authenticated"}

	// The tenant manages pipelines, templates and triggers in its namespace, and approves
	// there as an approver does (stepwise-approver: create Approvals, the verb approve on
	// pipelines), and nothing else.
	group := v1alpha1.SchemeGroupVersion.Group
	cluster.ServiceAccount(t, a, env.Tenant, rbacv1.PolicyRule{
		APIGroups: []string{group},
		Resources: []string{"pipelines", "pipelinetemplates", "pipelinetriggers"},
		Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	}, rbacv1.PolicyRule{
		APIGroups: []string{group}, Resources: []string{"pipelines"}, Verbs: []string{v1alpha1.VerbApprove},
	}, rbacv1.PolicyRule{
		APIGroups: []string{group}, Resources: []string{"approvals"}, Verbs: []string{"get", "list", "watch", "create"},
	})
	// The runner writes ConfigMaps (test.record, k8s.apply); the watcher lists them and
	// Nodes (a trigger's right). Not both: a trigger on ConfigMaps whose pipelines write
	// ConfigMaps would feed itself without end, which is the tenant's doing, not a bug.
	cluster.ServiceAccount(t, a, env.Runner, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch", "delete"},
	})
	cluster.ServiceAccount(t, a, env.Watcher)
	cluster.GrantClusterWide(t, a, env.Watcher, "hostile-watcher-"+a, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps", "nodes"}, Verbs: []string{"get", "list", "watch"},
	})

	labels := map[string]string{baitLabel: "true"}
	for i := range 2 {
		name := fmt.Sprintf("bait-%d", i)
		_, err := cluster.Client.CoreV1().ConfigMaps(a).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"k": "v"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		env.ConfigMaps = append(env.ConfigMaps, name)

		node := fmt.Sprintf("hostile-%s-%d", a, i)
		_, err = cluster.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
		env.Nodes = append(env.Nodes, node)
	}
	foreign, err := cluster.Client.CoreV1().ConfigMaps(b).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "bait-foreign", Labels: labels}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: env.TenantUser, Groups: env.TenantGroups}
	// The API server warns of every unknown field the generator adds (and prunes them):
	// expected, and noise in the test's output.
	cfg.WarningHandler = rest.NoWarnings{}
	as, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	admin, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	tn := &tenant{env: env, schemas: schemas, as: as, admin: admin, foreignBait: foreign.UID}
	tn.env.Request = func(pipeline, step string) string { return tn.request(ctx, pipeline, step) }
	return tn
}

// request reads, as the tenant (an approver does: kubectl stepwise approve), the request of
// the wait for approval of a pipeline's step; "" when it does not wait or cannot be read.
func (tn *tenant) request(ctx context.Context, pipeline, step string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := tn.as.Resource(tn.schemas[KindPipeline].Resource).Namespace(tn.env.Namespace).Get(ctx, pipeline, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	steps, _, _ := unstructured.NestedSlice(p.Object, "status", "steps")
	for _, s := range steps {
		m, _ := s.(map[string]any)
		if name, _ := m["name"].(string); name != step {
			continue
		}
		if phase, _ := m["phase"].(string); phase != string(v1alpha1.StepAwaitingApproval) {
			return ""
		}
		request, _, _ := unstructured.NestedString(m, "approval", "request")
		return request
	}
	return ""
}

// outcome counts what became of the generated objects.
type outcome struct {
	generated, admitted map[string]int
	// refused counts the refusals by kind and by the reason of the API server's answer.
	refused map[string]map[string]int
	// updates and deletes are of admitted objects, as the tenant.
	updates, updatesRefused, deletes int
	// surprises are answers the API server should not give to any object (5xx).
	surprises []string
	// largestAdmitted is the largest object the API server took, in bytes of JSON.
	largestAdmitted int
	// described says what the generator did to each admitted object, by "Kind name", for
	// the report of one the operator did not handle.
	described map[string]string
}

func newOutcome() *outcome {
	return &outcome{generated: map[string]int{}, admitted: map[string]int{}, refused: map[string]map[string]int{}, described: map[string]string{}}
}

func (o *outcome) totals() (generated, admitted, refused int) {
	for _, k := range Kinds {
		generated += o.generated[k]
		admitted += o.admitted[k]
		for _, n := range o.refused[k] {
			refused += n
		}
	}
	return generated, admitted, refused
}

// refusals says, by kind, how many were refused and why: Pipeline 12 {Invalid:10 BadRequest:2}.
func (o *outcome) refusals() string {
	var parts []string
	for _, k := range Kinds {
		reasons := o.refused[k]
		n := 0
		for _, c := range reasons {
			n += c
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d admitted, %d refused %s", k, o.admitted[k], o.generated[k], n, countsString(reasons)))
	}
	return strings.Join(parts, "; ")
}

// reasonClass is the class of the API server's refusal: its status reason, else its HTTP
// code, else what failed on the client's side.
func reasonClass(err error) string {
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return string(r)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		return fmt.Sprintf("HTTP%d", status.Status().Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "ClientTimeout"
	}
	return "ClientError"
}

// surprising tells an answer no object should get: the API server failed, or timed out.
func surprising(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsUnexpectedServerError(err) || reasonClass(err) == "ClientTimeout"
}

// apply generates count objects and applies each as the tenant, then maybe updates or
// deletes it as the generator says. It stops early if the operator exits.
func (tn *tenant) apply(ctx context.Context, t *testing.T, g *Generator, count int, out *outcome) {
	for range count {
		select {
		case <-operator.Exited():
			t.Errorf("the operator exited while the hostile objects were applied (log: %s)", operator.Log)
			return
		default:
		}
		o := g.Next()
		out.generated[o.Kind]++
		res := tn.as.Resource(tn.schemas[o.Kind].Resource).Namespace(tn.env.Namespace)
		created, err := tn.call(ctx, func(ctx context.Context) (*unstructured.Unstructured, error) {
			return res.Create(ctx, &unstructured.Unstructured{Object: o.Object}, metav1.CreateOptions{})
		})
		if err != nil {
			if out.refused[o.Kind] == nil {
				out.refused[o.Kind] = map[string]int{}
			}
			out.refused[o.Kind][reasonClass(err)]++
			if surprising(err) {
				out.surprises = append(out.surprises, fmt.Sprintf("create %s: %v", o, shorten(err.Error(), 300)))
			}
			continue
		}
		out.admitted[o.Kind]++
		out.largestAdmitted = max(out.largestAdmitted, o.Size())
		out.described[o.Kind+" "+created.GetName()] = o.String()
		switch g.Followup() {
		case FollowUpdate:
			up := &Object{Index: o.Index, Kind: o.Kind, Object: created.DeepCopy().Object, Mutations: slices.Clone(o.Mutations)}
			g.Mutate(up)
			_, err := tn.call(ctx, func(ctx context.Context) (*unstructured.Unstructured, error) {
				return res.Update(ctx, &unstructured.Unstructured{Object: up.Object}, metav1.UpdateOptions{})
			})
			out.updates++
			if err == nil {
				out.described[o.Kind+" "+created.GetName()] = up.String() + " (the last one by an update)"
			} else {
				out.updatesRefused++
				if surprising(err) {
					out.surprises = append(out.surprises, fmt.Sprintf("update %s: %v", up, shorten(err.Error(), 300)))
				}
			}
		case FollowDelete:
			// At once: the deletion races the operator's first look at the object.
			if _, err := tn.call(ctx, func(ctx context.Context) (*unstructured.Unstructured, error) {
				return nil, res.Delete(ctx, created.GetName(), metav1.DeleteOptions{})
			}); err == nil {
				out.deletes++
			}
		}
	}
}

// call bounds one request: a request the API server does not answer in time is itself a
// finding.
func (tn *tenant) call(ctx context.Context, f func(context.Context) (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return f(ctx)
}

// list lists a kind in ns as the administrator, as unstructured objects: an object the
// typed client cannot decode must not hide the others.
func (tn *tenant) list(ctx context.Context, kind, ns string) ([]unstructured.Unstructured, error) {
	l, err := tn.admin.Resource(tn.schemas[kind].Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// readyCondition reads the Ready condition of an object's status.
func readyCondition(u *unstructured.Unstructured) (cond map[string]any, ok bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == v1alpha1.ConditionReady {
			return m, true
		}
	}
	return nil, false
}

// unhandled lists the tenant's pipelines and triggers that have no Ready condition for
// their generation: the operator did not handle them (the design: every admitted field is
// handled, and an object that cannot be handled fails alone). Templates and Approvals have
// no status: what the operator makes of an Approval shows in its pipeline's
// (approvalViolations). An object whose condition
// cannot be written (with its status it would pass etcd's bound) counts as handled when
// the operator told of it in a Warning Event; byEvent counts those.
func (tn *tenant) unhandled(ctx context.Context) (pending []string, byEvent int, states map[string]int, err error) {
	events, err := cluster.Client.CoreV1().Events(tn.env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("list events: %w", err)
	}
	states = map[string]int{}
	warned := map[string]bool{}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && e.Source.Component == controller.ControllerName {
			warned[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] = true
		}
	}
	for _, kind := range []string{KindPipeline, KindTrigger} {
		items, err := tn.list(ctx, kind, tn.env.Namespace)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("list %s: %w", kind, err)
		}
		for i := range items {
			u := &items[i]
			if u.GetDeletionTimestamp() != nil {
				continue
			}
			cond, ok := readyCondition(u)
			states[fmt.Sprintf("%s Ready=%v/%v", kind, cond["status"], cond["reason"])]++
			if kind == KindPipeline && u.GetLabels()[v1alpha1.LabelObjectUID] != "" {
				states["Pipeline made by a trigger"]++
			}
			gen, _, _ := unstructured.NestedInt64(cond, "observedGeneration")
			switch {
			case ok && gen == u.GetGeneration():
			case warned[kind+"/"+u.GetName()]:
				byEvent++
			default:
				pending = append(pending, fmt.Sprintf("%s %s (generation %d, Ready condition %v)", kind, u.GetName(), u.GetGeneration(), cond))
			}
		}
	}
	sort.Strings(pending)
	return pending, byEvent, states, nil
}

// waitHandled waits, up to timeout, until every pipeline and trigger of the tenant is
// handled, and returns those that are not, how many were handled by an Event, and the
// objects' Ready status and reason, counted (what the operator made of them).
func (tn *tenant) waitHandled(ctx context.Context, timeout time.Duration) (pending []string, byEvent int, states map[string]int) {
	_ = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		p, n, s, err := tn.unhandled(ctx)
		if err != nil {
			pending = []string{err.Error()}
			return false, nil
		}
		pending, byEvent, states = p, n, s
		return len(p) == 0, nil
	})
	return pending, byEvent, states
}

// countsString prints counts in key order: {a:1 b:2}.
func countsString(counts map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, counts[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// breaches lists what the tenant reached outside its namespace: objects a step made
// elsewhere (their names start with hostile-), a pipeline of the canary's namespace that
// is not a canary, a pipeline for the foreign bait, a cordoned or tainted bait node.
func (tn *tenant) breaches(ctx context.Context) ([]string, error) {
	var out []string
	namespaces, err := cluster.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, ns := range namespaces.Items {
		if ns.Name == tn.env.Namespace {
			continue
		}
		if strings.HasPrefix(ns.Name, "hostile-") {
			out = append(out, "namespace "+ns.Name)
		}
		cms, err := cluster.Client.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, cm := range cms.Items {
			if strings.HasPrefix(cm.Name, "hostile-") || strings.HasPrefix(cm.Name, "stepwise-record-") {
				out = append(out, "ConfigMap "+ns.Name+"/"+cm.Name)
			}
		}
	}
	crbs, err := cluster.Client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, crb := range crbs.Items {
		if strings.HasPrefix(crb.Name, "hostile-") && !strings.HasPrefix(crb.Name, "hostile-watcher-") {
			out = append(out, "ClusterRoleBinding "+crb.Name)
		}
	}
	pipelines, err := tn.list(ctx, KindPipeline, tn.env.Foreign)
	if err != nil {
		return nil, err
	}
	for _, p := range pipelines {
		if !strings.HasPrefix(p.GetName(), "canary-") {
			out = append(out, "Pipeline "+tn.env.Foreign+"/"+p.GetName())
		}
	}
	foreignApprovals, err := tn.list(ctx, KindApproval, tn.env.Foreign)
	if err != nil {
		return nil, err
	}
	for _, a := range foreignApprovals {
		out = append(out, "Approval "+tn.env.Foreign+"/"+a.GetName())
	}
	ours, err := tn.list(ctx, KindPipeline, tn.env.Namespace)
	if err != nil {
		return nil, err
	}
	for _, p := range ours {
		if p.GetLabels()[v1alpha1.LabelObjectUID] == string(tn.foreignBait) {
			out = append(out, "Pipeline "+p.GetName()+" for the ConfigMap of the canary's namespace")
		}
	}
	for _, name := range tn.env.Nodes {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			out = append(out, fmt.Sprintf("Node %s: %v", name, err))
			continue
		}
		if n.Spec.Unschedulable {
			out = append(out, "Node "+name+" cordoned")
		}
		for _, taint := range n.Spec.Taints {
			if strings.HasPrefix(taint.Key, "stepwise.dev/") {
				out = append(out, "Node "+name+" tainted "+taint.Key)
			}
		}
	}
	return out, nil
}

// approvalViolations lists what must never be in the status of the tenant's pipelines,
// whether they are done or not:
//   - a step that waits for approval whose create hooks ran (Running, Succeeded, or Waiting
//     to retry one) without approvedTime and as many counted approvals as it requires;
//   - a counted decision by anyone but the tenant: it is the only one that creates
//     Approvals there, and the install's admission policy refuses a forged user;
//   - a counted decision under four eyes: the tenant created every pipeline there, or the
//     trigger that created it;
//   - a counted decision by a user the step does not name, when it names users only, or
//     by the tenant when it names groups none of which is the tenant's.
//
// Pipelines whose steps may have changed since they ran (updated under updatePolicy Rerun)
// are left out: their status may describe the steps before the edit. states counts the
// steps that need approval by phase, approvedTime and counted decisions, for the report.
func (tn *tenant) approvalViolations(ctx context.Context) (violations []string, states map[string]int, err error) {
	pipelines, err := tn.list(ctx, KindPipeline, tn.env.Namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("list pipelines: %w", err)
	}
	states = map[string]int{}
	for i := range pipelines {
		p := &pipelines[i]
		if p.GetDeletionTimestamp() != nil {
			continue
		}
		// The status is the operator's, typed; the spec is the tenant's, read as it is.
		var status v1alpha1.PipelineStatus
		if err := decodeField(p, "status", &status); err != nil {
			violations = append(violations, fmt.Sprintf("Pipeline %s: status cannot be read: %v", p.GetName(), err))
			continue
		}
		if policy, _, _ := unstructured.NestedString(p.Object, "spec", "updatePolicy"); p.GetGeneration() > 1 && policy == string(v1alpha1.UpdateRerun) {
			states["left out: updated under Rerun"]++
			continue
		}
		policies := map[string]*v1alpha1.ApprovalPolicy{}
		if _, ok, _ := unstructured.NestedFieldNoCopy(p.Object, "spec", "templateRef"); ok {
			if status.Template != nil {
				for _, st := range status.Template.Steps {
					if st.Approval != nil {
						policies[st.Name] = st.Approval
					}
				}
			}
		} else {
			steps, _, _ := unstructured.NestedSlice(p.Object, "spec", "steps")
			for _, st := range steps {
				m, _ := st.(map[string]any)
				name, _ := m["name"].(string)
				approval, ok := m["approval"].(map[string]any)
				if !ok {
					continue
				}
				// A policy that does not decode still makes the step wait.
				policy := &v1alpha1.ApprovalPolicy{}
				if data, err := json.Marshal(approval); err == nil {
					_ = json.Unmarshal(data, policy)
				}
				policies[name] = policy
			}
		}
		for _, s := range status.Steps {
			policy, ok := policies[s.Name]
			if !ok {
				continue
			}
			where := fmt.Sprintf("Pipeline %s step %s", p.GetName(), s.Name)
			var approvedTime bool
			var required int32
			var counted []string
			if s.Approval != nil {
				approvedTime, required = s.Approval.ApprovedTime != nil, s.Approval.Required
				for _, d := range s.Approval.Decisions {
					if !d.Counted {
						continue
					}
					if d.Decision == v1alpha1.ApprovalApprove && !slices.Contains(counted, d.User) {
						counted = append(counted, d.User)
					}
					if why := tn.mustNotCount(policy, d.User); why != "" {
						violations = append(violations, fmt.Sprintf("%s: the %s by %q (Approval %s) counted, though %s", where, d.Decision, shorten(d.User, 80), d.Approval, why))
					}
				}
			}
			states[fmt.Sprintf("%s approved=%v counted=%d", s.Phase, approvedTime, len(counted))]++
			ran := s.Phase == v1alpha1.StepRunning || s.Phase == v1alpha1.StepSucceeded ||
				(s.Phase == v1alpha1.StepWaiting && slices.Contains([]v1alpha1.Hook{v1alpha1.HookPreCreate, v1alpha1.HookCreate, v1alpha1.HookPostCreate}, s.Hook))
			if ran && (!approvedTime || len(counted) < int(max(1, required))) {
				violations = append(violations, fmt.Sprintf("%s: phase %s (hook %q) with approvedTime %v and %d counted approvals of %d required: %+v",
					where, s.Phase, s.Hook, approvedTime, len(counted), max(1, required), s.Approval))
			}
		}
	}
	sort.Strings(violations)
	return violations, states, nil
}

// mustNotCount says why a decision by user must not count on a step with policy, or "".
func (tn *tenant) mustNotCount(policy *v1alpha1.ApprovalPolicy, user string) string {
	switch {
	case user != tn.env.TenantUser:
		return "only the tenant makes Approvals in its namespace, and the admission policy refuses another user"
	case policy.FourEyes:
		return "the step is under four eyes and the tenant created the pipeline or its trigger"
	case len(policy.Users)+len(policy.Groups) > 0 && !slices.Contains(policy.Users, user) &&
		!slices.ContainsFunc(policy.Groups, func(g string) bool { return slices.Contains(tn.env.TenantGroups, g) }):
		return "the step names neither the user nor a group of theirs"
	}
	return ""
}

// decodeField decodes the field key of u into out, through JSON.
func decodeField(u *unstructured.Unstructured, key string, out any) error {
	v, ok := u.Object[key]
	if !ok {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// teardown deletes everything of the tenant: triggers first (so that they start no more
// pipelines), then pipelines, which get the grace to run their teardown and then the
// Orphan policy, then templates, then the namespace. It reports how many pipelines needed
// the Orphan policy, and fails for whatever is still there after the deadlines.
func (tn *tenant) teardown(ctx context.Context, t *testing.T) (orphaned int) {
	ns := tn.env.Namespace
	deleteAll := func(kind string) {
		err := tn.admin.Resource(tn.schemas[kind].Resource).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		require.NoError(t, err, "delete the %ss of %s", kind, ns)
	}
	gone := func(kind string, timeout time.Duration) []unstructured.Unstructured {
		var left []unstructured.Unstructured
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			items, err := tn.list(ctx, kind, ns)
			if err != nil {
				return false, nil
			}
			left = items
			return len(items) == 0, nil
		})
		return left
	}
	describe := func(items []unstructured.Unstructured) []string {
		var out []string
		for i := range items {
			phase, _, _ := unstructured.NestedString(items[i].Object, "status", "phase")
			cond, _ := readyCondition(&items[i])
			out = append(out, fmt.Sprintf("%s (finalizers %v, phase %q, Ready %v)", items[i].GetName(), items[i].GetFinalizers(), phase, cond))
		}
		return out
	}

	deleteAll(KindTrigger)
	if left := gone(KindTrigger, time.Minute); len(left) > 0 {
		t.Errorf("triggers of %s still there a minute after their deletion: %s", ns, describe(left))
	}
	deleteAll(KindPipeline)
	if left := gone(KindPipeline, teardownGrace); len(left) > 0 {
		// Their teardown may never succeed (the tenant asked for the impossible): the
		// Orphan policy is the way out, and it must work.
		for _, p := range left {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan)
			_, err := tn.admin.Resource(tn.schemas[KindPipeline].Resource).Namespace(ns).Patch(ctx, p.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if err == nil {
				orphaned++
			} else if !apierrors.IsNotFound(err) {
				t.Errorf("annotate pipeline %s/%s %s=%s: %v", ns, p.GetName(), v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan, err)
			}
		}
		if left := gone(KindPipeline, time.Minute); len(left) > 0 {
			t.Errorf("pipelines of %s still there a minute after the Orphan policy: %s", ns, describe(left))
		}
	}
	deleteAll(KindTemplate)
	deleteAll(KindApproval)

	err := cluster.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cluster.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		var left []string
		for _, kind := range Kinds {
			items, _ := tn.list(context.Background(), kind, ns)
			for _, d := range describe(items) {
				left = append(left, kind+" "+d)
			}
		}
		t.Errorf("namespace %s not deleted within 2 minutes; left: %v", ns, left)
	}
	return orphaned
}
