package trigger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/trigger/gate"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

const (
	// gateRecheck is when gates that did not hold are checked again: not at every event
	// of the trigger's kind (a Node's heartbeat), which would list and query in a loop.
	gateRecheck = 10 * time.Second
	// DefaultGatesCheckTimeout bounds the check of all of a trigger's gates: a slow API
	// server or Prometheus holds one trigger worker that long at most (and a namespace
	// holds at most its share of the trigger workers: see fairqueue.Shares).
	DefaultGatesCheckTimeout = 10 * time.Second
	// maxGateObjects bounds the objects a gate lists; more is an error of the gate, which
	// should select fewer.
	maxGateObjects = 1000
	// gateListPage is the most objects one list call of a gate asks for, so that what the
	// API server sends at once is a page, not every object the gate selects; fewer once
	// the objects seen show that the rest of maxGateBytes holds fewer (gatePageLimit).
	gateListPage = 100
	// gateFirstPage is the first list call's page: before any object is seen, their size
	// is unknown, and a hundred of the largest would be 150 MiB.
	gateFirstPage = 10
	// maxGateBytes bounds what the objects of one gate hold in the operator while its
	// condition is evaluated, as heldBytes counts it after stripGateObject. The objects'
	// bytes are the tenant's to choose (a ConfigMap may hold 1 MiB): without a bound, a
	// gate over a thousand of them held a GiB every gateRecheck. 8 MiB holds
	// maxGateObjects objects of 8 KiB (a Node, a Deployment without managedFields), and
	// a gate is checked by one trigger worker at a time (--trigger-workers, 2 by default).
	maxGateBytes = 8 << 20
	// heldValueBytes is what heldBytes counts for each value and map key besides its
	// string bytes: about the Go memory of a string header, an interface and a map slot,
	// so that an object of many tiny fields counts what it holds, not its few JSON bytes.
	heldValueBytes = 32
)

// gates is what one sync learnt of the trigger's health gates.
type gates struct {
	// checked: the gates were looked at in this sync (at the first start they could hold
	// back); open: they all held.
	checked, open bool
	// status is the gates' status: as last written, updated when checked.
	status []v1alpha1.TriggerGateStatus
	// recheckIn, when not zero, is when the closed gates are checked again.
	recheckIn time.Duration
}

// gatesOpen tells whether every health gate holds, checking them the first time a sync
// would start something. A gate found closed is not checked again before gateRecheck
// (the trigger is looked at again then); open gates are checked before every start. A
// closed gate past its deadline stops the trigger (brakes.gateStop).
func (ts *triggerSync) gatesOpen(ctx context.Context) bool {
	g := &ts.gates
	if len(ts.trig.Spec.Gates) == 0 {
		return true
	}
	if g.checked {
		return g.open
	}
	g.checked = true
	now := ts.c.clock.Now()
	if last := ts.mem.gatesClosedAt; !last.IsZero() && now.Sub(last) < gateRecheck && ts.mem.gatesGeneration == ts.trig.Generation {
		g.recheckIn = gateRecheck - now.Sub(last)
		return false
	}
	previous := map[string]v1alpha1.TriggerGateStatus{}
	for _, s := range ts.trig.Status.Gates {
		previous[s.Name] = s
	}
	g.open, g.status = true, nil
	ctx, cancel := context.WithTimeout(ctx, ts.c.gatesCheckTimeout)
	defer cancel()
	for i := range ts.trig.Spec.Gates {
		spec := &ts.trig.Spec.Gates[i]
		holds, message := ts.checkGate(ctx, spec, now)
		s := v1alpha1.TriggerGateStatus{Name: spec.Name, Holds: holds, Message: truncate(message, maxMessage),
			Since: metav1.NewTime(now).Rfc3339Copy()}
		if old, ok := previous[spec.Name]; ok && old.Holds == holds {
			s.Since = old.Since
		}
		g.status = append(g.status, s)
		if holds {
			continue
		}
		g.open = false
		ts.gateDeadline(spec, s, now)
	}
	ts.mem.gatesClosedAt, ts.mem.gatesGeneration = time.Time{}, ts.trig.Generation
	if !g.open {
		ts.mem.gatesClosedAt = now
		g.recheckIn = gateRecheck
	}
	return g.open
}

// gateDeadline stops the trigger when a closed gate has not held for longer than its
// deadline, counted from when it stopped holding or from the last resume, the later.
func (ts *triggerSync) gateDeadline(spec *v1alpha1.HealthGate, s v1alpha1.TriggerGateStatus, now time.Time) {
	if spec.Deadline == nil || ts.brakes.gateStop != nil {
		return
	}
	since := s.Since.Time
	if r := ts.brakes.resumed; r != nil && r.At.After(since) {
		since = r.At.Time
	}
	if now.Sub(since) < spec.Deadline.Duration {
		return
	}
	ts.brakes.gateStop = &v1alpha1.TriggerGateStop{Gate: spec.Name, Since: s.Since, Message: s.Message}
	ts.event(corev1.EventTypeWarning, v1alpha1.TriggerReasonGateDeadlineExceeded,
		"gate %s has not held for %s (deadline %s): %s; nothing starts until a person resumes the trigger",
		spec.Name, now.Sub(since).Round(time.Second), spec.Deadline.Duration, s.Message)
}

// checkGate checks one gate: whether it holds, and why not. A gate that cannot be
// checked does not hold.
func (ts *triggerSync) checkGate(ctx context.Context, spec *v1alpha1.HealthGate, now time.Time) (bool, string) {
	switch {
	case spec.Objects != nil:
		return ts.checkObjectsGate(ctx, spec.Objects)
	case spec.Prometheus != nil:
		return ts.checkPrometheusGate(ctx, spec.Name, spec.Prometheus, now)
	}
	return false, "the gate has neither objects nor prometheus"
}

// gateRefusedHint completes a Prometheus gate's message when the egress policy refused
// its address: the flags that would allow it.
const gateRefusedHint = " (an operator admin allows addresses with the operator's flag --gate-allowed-cidrs, " +
	"public ones with --gate-allow-public-addresses, or sets this namespace's Prometheus with --gate-prometheus-url-for)"

// checkPrometheusGate runs a gate's query where the trigger's namespace may read: at the
// URL an operator admin set for the namespace (--gate-prometheus-url-for), as written,
// for that Prometheus or label proxy holds what the namespace may read; else at the
// gate's own URL, under the egress policy, with namespace="<the trigger's namespace>" on
// every selector (gate.Scope). What it writes of a failure is the failure's fixed text
// (gate.QueryError), never the answer's bytes nor the OS's error text; of a result, the
// count and the first series' labels, which are then of that namespace's series.
func (ts *triggerSync) checkPrometheusGate(ctx context.Context, name string, spec *v1alpha1.PrometheusGate, now time.Time) (bool, string) {
	client, url, query := ts.c.gateHTTP, spec.URL, spec.Query
	adminURL, byAdmin := ts.c.gatePrometheusURLs[ts.trig.Namespace]
	if byAdmin {
		client, url = ts.c.gateAdminHTTP, adminURL
	} else {
		scoped, err := gate.Scope(query, ts.trig.Namespace)
		if err != nil {
			return false, err.Error()
		}
		query = scoped
	}
	if client == nil {
		return false, "this operator makes no Prometheus queries"
	}
	res, err := gate.Query(ctx, client, url, query, now)
	var failed *gate.QueryError
	switch {
	case errors.As(err, &failed):
		// The cause may quote the answer or the OS: for an admin who asks, never by default.
		klog.FromContext(ctx).V(4).Info("A Prometheus gate's query failed", "trigger", klog.KObj(ts.trig), "gate", name,
			"byAdmin", byAdmin, "err", errors.Unwrap(failed))
		message := failed.Error()
		if byAdmin {
			// The admin's URL is the admin's to show.
			message = "query the namespace's Prometheus (set by the operator admin): " + failed.Reason()
		}
		if failed.Failure == gate.FailureRefused {
			message += gateRefusedHint
		}
		return false, message
	case err != nil: // not reached: Query's errors are QueryErrors
		return false, "the Prometheus query failed"
	case res.Series > 0:
		return false, fmt.Sprintf("the query returns %s, first %s", count(res.Series, "series", "series"), res.First)
	}
	return true, ""
}

// checkObjectsGate lists the gate's objects as the trigger's ServiceAccount (so that a
// gate reads nothing the ServiceAccount could not) and evaluates its condition over them.
// It lists a page at a time and holds at most maxGateObjects objects of maxGateBytes in
// all, stripped of what no condition needs; of a condition that reads only metadata, it
// lists only metadata when the client provider can.
func (ts *triggerSync) checkObjectsGate(ctx context.Context, spec *v1alpha1.ObjectsGate) (bool, string) {
	cond, err := ts.c.conditions.compile(spec.Condition)
	if err != nil {
		return false, err.Error()
	}
	sa := serviceAccountOf(ts.trig)
	clients, err := ts.c.clients.ForServiceAccount(sa.Namespace, sa.Name)
	if err != nil {
		return false, fmt.Sprintf("act as ServiceAccount %s: %v", sa.Name, err)
	}
	gv, err := schema.ParseGroupVersion(spec.Resource.APIVersion)
	if err != nil {
		return false, fmt.Sprintf("resource: %v", err)
	}
	mapping, err := clients.Mapper.RESTMapping(gv.WithKind(spec.Resource.Kind).GroupKind(), gv.Version)
	if err != nil {
		return false, fmt.Sprintf("resource %s %s: %v", spec.Resource.APIVersion, spec.Resource.Kind, err)
	}
	if mapping.Resource.GroupResource() == corev1.Resource("secrets") {
		// What a condition fails on (a conversion of a value) reaches the status: no
		// Secret value may. The schema refuses it too; this holds for any spelling.
		return false, "a gate may not read Secrets"
	}
	selector, err := rules.SelectorOf(spec.Selector)
	if err != nil {
		return false, fmt.Sprintf("selector: %v", err)
	}
	pages := gateLister(clients, mapping, ts.trig.Namespace, cond.MetadataOnly())
	objects, err := listGateObjects(ctx, pages, selector.String(), mapping.Resource.GroupResource().String())
	var bound *gateBoundError
	switch {
	case errors.As(err, &bound):
		return false, bound.Error()
	case err != nil:
		return false, fmt.Sprintf("list %s as ServiceAccount %s: %v", mapping.Resource.GroupResource(), sa.Name, err)
	}
	holds, err := cond.Holds(ctx, objects)
	switch {
	case err != nil:
		return false, err.Error()
	case !holds:
		return false, fmt.Sprintf("the condition is false over %s", count(len(objects), mapping.Resource.Resource, mapping.Resource.Resource))
	}
	return true, ""
}

// gateLister is how the gate's objects are listed, as the trigger's ServiceAccount: their
// metadata only when the condition reads nothing else and the clients can, else whole.
func gateLister(clients *executor.Clients, mapping *meta.RESTMapping, namespace string, metadataOnly bool) pageLister {
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if metadataOnly && clients.Metadata != nil {
		var resource metadata.ResourceInterface = clients.Metadata.Resource(mapping.Resource)
		if namespaced {
			resource = clients.Metadata.Resource(mapping.Resource).Namespace(namespace)
		}
		return metadataPages(resource)
	}
	var resource dynamic.ResourceInterface = clients.Dynamic.Resource(mapping.Resource)
	if namespaced {
		resource = clients.Dynamic.Resource(mapping.Resource).Namespace(namespace)
	}
	return wholeObjectPages(resource)
}

// pageLister lists one page of a gate's objects, each as JSON maps, and the token of the
// next page ("" after the last).
type pageLister func(ctx context.Context, opts metav1.ListOptions) ([]map[string]any, string, error)

// wholeObjectPages lists whole objects.
func wholeObjectPages(resource dynamic.ResourceInterface) pageLister {
	return func(ctx context.Context, opts metav1.ListOptions) ([]map[string]any, string, error) {
		list, err := resource.List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		objects := make([]map[string]any, len(list.Items))
		for i := range list.Items {
			objects[i] = list.Items[i].Object
		}
		return objects, list.GetContinue(), nil
	}
}

// metadataPages lists metadata only, each object as {"metadata": ...}: all that a
// condition that reads only metadata reaches.
func metadataPages(resource metadata.ResourceInterface) pageLister {
	return func(ctx context.Context, opts metav1.ListOptions) ([]map[string]any, string, error) {
		list, err := resource.List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		objects := make([]map[string]any, len(list.Items))
		for i := range list.Items {
			md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&list.Items[i].ObjectMeta)
			if err != nil {
				return nil, "", fmt.Errorf("convert the metadata of %s: %w", list.Items[i].Name, err)
			}
			objects[i] = map[string]any{"metadata": md}
		}
		return objects, list.Continue, nil
	}
}

// gateBoundError says that the objects a gate selects passed one of its bounds: which,
// and how to get under it, and nothing of the objects.
type gateBoundError struct{ msg string }

func (e *gateBoundError) Error() string { return e.msg }

// listGateObjects lists the objects of resource (its plural, for messages) that selector
// selects, page by page, stripping each before it is kept. It stops, with a
// gateBoundError, as soon as they are more than maxGateObjects or hold more than
// maxGateBytes: the rest is never asked for, and what was kept is dropped.
func listGateObjects(ctx context.Context, pages pageLister, selector, resource string) ([]map[string]any, error) {
	tooMany := &gateBoundError{fmt.Sprintf("the gate selects more than %d %s, the most a gate reads: narrow the gate's selector",
		maxGateObjects, resource)}
	tooLarge := &gateBoundError{fmt.Sprintf("the %s the gate selects hold more than %d MiB, the most a gate reads: narrow the gate's selector",
		resource, maxGateBytes>>20)}
	var (
		objects       []map[string]any
		held, largest int64
		continueToken string
	)
	for {
		opts := metav1.ListOptions{LabelSelector: selector, Limit: gatePageLimit(len(objects), held, largest), Continue: continueToken}
		page, next, err := pages(ctx, opts)
		if err != nil {
			return nil, err
		}
		// A server may send more than the limit: the bounds hold of what it sent.
		for _, obj := range page {
			if len(objects) == maxGateObjects {
				return nil, tooMany
			}
			stripGateObject(obj)
			size := heldBytes(obj)
			held, largest = held+size, max(largest, size)
			if held > maxGateBytes {
				return nil, tooLarge
			}
			objects = append(objects, obj)
		}
		if next == "" {
			return objects, nil
		}
		if len(objects) == maxGateObjects {
			return nil, tooMany
		}
		continueToken = next
	}
}

// gatePageLimit is how many objects the next list call asks for, when kept objects were
// kept, holding held bytes, the largest of them largest bytes: a page at most; no more
// than maxGateObjects leaves room for (the continue token then tells whether more
// remain); and no more than the rest of maxGateBytes holds of objects as large as the
// largest, plus one to learn that the budget is passed. Never 0, which asks for all.
func gatePageLimit(kept int, held, largest int64) int64 {
	limit := min(int64(gateListPage), int64(maxGateObjects-kept))
	if largest > 0 {
		limit = min(limit, (maxGateBytes-held)/largest+1)
	} else {
		limit = min(limit, gateFirstPage)
	}
	return max(limit, 1)
}

// stripGateObject drops from obj what no condition needs and can be large: the
// managedFields (as large as the fields they list) and the last-applied configuration
// (a whole copy of the object), so that they are neither held nor counted.
func stripGateObject(obj map[string]any) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	delete(md, "managedFields")
	if annotations, ok := md["annotations"].(map[string]any); ok {
		delete(annotations, corev1.LastAppliedConfigAnnotation)
	}
}

// heldBytes estimates the memory v (JSON maps, lists and scalars) holds: the bytes of its
// strings and keys, plus heldValueBytes for each value and key.
func heldBytes(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(heldValueBytes)
		for key, value := range v {
			n += heldValueBytes + int64(len(key)) + heldBytes(value)
		}
		return n
	case []any:
		n := int64(heldValueBytes)
		for _, value := range v {
			n += heldBytes(value)
		}
		return n
	case string:
		return heldValueBytes + int64(len(v))
	}
	return heldValueBytes
}

// maxConditions bounds the compiled conditions kept: whoever may create triggers chooses
// their text.
const maxConditions = 256

// conditionCache keeps the compiled conditions of the gates, by their text, so that a
// gate checked every few seconds is compiled once.
type conditionCache struct {
	mu     sync.Mutex
	byExpr map[string]compiledCondition
}

type compiledCondition struct {
	cond *gate.Condition
	err  error
}

func (c *conditionCache) compile(expr string) (*gate.Condition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if got, ok := c.byExpr[expr]; ok {
		return got.cond, got.err
	}
	if c.byExpr == nil || len(c.byExpr) >= maxConditions {
		c.byExpr = map[string]compiledCondition{}
	}
	cond, err := gate.CompileCondition(expr)
	c.byExpr[expr] = compiledCondition{cond: cond, err: err}
	return cond, err
}

// gateStatus is the gates' status: as checked in this sync, else as last written, of the
// gates the spec still has.
func (ts *triggerSync) gateStatus() []v1alpha1.TriggerGateStatus {
	if ts.gates.checked && ts.gates.status != nil {
		return ts.gates.status
	}
	var out []v1alpha1.TriggerGateStatus
	for _, s := range ts.trig.Status.Gates {
		if slices.ContainsFunc(ts.trig.Spec.Gates, func(g v1alpha1.HealthGate) bool { return g.Name == s.Name }) {
			out = append(out, s)
		}
	}
	return out
}

// gatesMessage names the gates that do not hold, and why.
func (ts *triggerSync) gatesMessage() string {
	var closed []string
	for _, s := range ts.gateStatus() {
		if !s.Holds {
			closed = append(closed, fmt.Sprintf("gate %s does not hold since %s: %s", s.Name, s.Since.UTC().Format(time.RFC3339), s.Message))
		}
	}
	if len(closed) == 0 {
		return "a health gate does not hold"
	}
	return strings.Join(closed, "; ")
}
