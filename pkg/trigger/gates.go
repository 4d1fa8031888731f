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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/trigger/gate"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

const (
	// gateRecheck is when gates that did not hold are checked again: not at every event
	// of the trigger's kind (a Node's heartbeat), which would list and query in a loop.
	gateRecheck = 10 * time.Second
	// gatesCheckTimeout bounds the check of all of a trigger's gates: a slow API server or
	// Prometheus holds one trigger worker that long at most (and a namespace holds at
	// most its share of the trigger workers: see fairqueue.Shares).
	gatesCheckTimeout = 10 * time.Second
	// maxGateObjects bounds the objects a gate lists; more is an error of the gate, which
	// should select fewer.
	maxGateObjects = 1000
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
	ctx, cancel := context.WithTimeout(ctx, gatesCheckTimeout)
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
		if ts.c.gateHTTP == nil {
			return false, "this operator makes no Prometheus queries"
		}
		res, err := gate.Query(ctx, ts.c.gateHTTP, spec.Prometheus.URL, spec.Prometheus.Query, now)
		var refused *egress.RefusedError
		switch {
		case errors.As(err, &refused):
			return false, fmt.Sprintf("query Prometheus at %s: %s is %s: health gates may not query it unless an operator admin allows its range with the operator's flag --gate-allowed-cidrs",
				egress.RedactURL(spec.Prometheus.URL), refused.Addr, refused.Range)
		case err != nil:
			return false, err.Error()
		case res.Series > 0:
			return false, fmt.Sprintf("the query returns %s, first %s", count(res.Series, "series", "series"), res.First)
		}
		return true, ""
	}
	return false, "the gate has neither objects nor prometheus"
}

// checkObjectsGate lists the gate's objects as the trigger's ServiceAccount (so that a
// gate reads nothing the ServiceAccount could not) and evaluates its condition over them.
func (ts *triggerSync) checkObjectsGate(ctx context.Context, spec *v1alpha1.ObjectsGate) (bool, string) {
	cond, err := ts.c.conditions.compile(spec.Condition)
	if err != nil {
		return false, err.Error()
	}
	clients, err := ts.c.clients.ForServiceAccount(ts.trig.Namespace, serviceAccountOf(ts.trig))
	if err != nil {
		return false, fmt.Sprintf("act as ServiceAccount %s: %v", serviceAccountOf(ts.trig), err)
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
	var resource dynamic.ResourceInterface = clients.Dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		resource = clients.Dynamic.Resource(mapping.Resource).Namespace(ts.trig.Namespace)
	}
	list, err := resource.List(ctx, metav1.ListOptions{LabelSelector: selector.String(), Limit: maxGateObjects})
	if err != nil {
		return false, fmt.Sprintf("list %s as ServiceAccount %s: %v", mapping.Resource.GroupResource(), serviceAccountOf(ts.trig), err)
	}
	if list.GetContinue() != "" {
		return false, fmt.Sprintf("more than %d %s: select fewer", maxGateObjects, mapping.Resource.GroupResource())
	}
	objects := make([]map[string]any, 0, len(list.Items))
	for i := range list.Items {
		objects = append(objects, list.Items[i].Object)
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
