package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Wait is k8s.wait: its Create waits until an object meets a condition.
//
// Parameters: apiVersion, kind and name of the object; namespace (default: the
// pipeline's; ignored for cluster-scoped kinds); then either condition, e.g. Available,
// met when .status.conditions[type=CONDITION].status is "True", or jsonPath (a template
// such as {.status.readyReplicas}) and value, met when the template prints exactly value;
// and timeout, a positive Go duration (default 5m). The engine checks them against
// Describe before any hook. Secrets are refused (see secret.go): what k8s.wait observes
// ends up in the pipeline's status.
//
// A condition counts only once the status describes the object's current generation:
// when .status.observedGeneration, or the condition's observedGeneration, is set and
// older than .metadata.generation, the condition is not met yet.
//
// The executor keeps no state: the wait starts at the hook's first call, which the engine
// tells every call (the request's HookStarted), and the step fails with reason Timeout
// once the wait has lasted longer than timeout. When the condition is met, Create is done
// with the output "observed": the condition's status, or the JSONPath's value.
type Wait struct{ executor.Base }

func (Wait) Name() string { return "k8s.wait" }

// ObservedOutput is the output of k8s.wait: what it saw when the condition was met.
const ObservedOutput = "observed"

// waitPoll is how often k8s.wait looks at the object again.
const waitPoll = 2 * time.Second

// maxObserved bounds the "observed" output and values quoted in messages.
const maxObserved = 256

type waitParams struct {
	gvk       schema.GroupVersionKind
	name      string
	namespace string
	condition string
	jsonPath  string
	template  *jsonpath.JSONPath
	value     string
	timeout   time.Duration
}

// parseWaitParams reads the parameters, which the engine checked against Describe before
// the hook (required, types, the timeout's default), and checks what their types do not
// say; every problem is a permanent error naming the parameter.
func parseWaitParams(req *executor.Request) (*waitParams, error) {
	if err := nonEmpty(req, "apiVersion", "kind", "name"); err != nil {
		return nil, err
	}
	p := &waitParams{
		name:      req.String("name"),
		namespace: req.String("namespace"),
		condition: req.String("condition"),
		jsonPath:  req.String("jsonPath"),
		value:     req.String("value"),
		timeout:   req.Duration("timeout"),
	}
	gv, err := schema.ParseGroupVersion(req.String("apiVersion"))
	if err != nil {
		return nil, invalidParam("apiVersion", "%v", err)
	}
	p.gvk = gv.WithKind(req.String("kind"))
	if isSecretKind(p.gvk.GroupKind()) {
		return nil, errSecretRefused()
	}

	switch {
	case p.condition != "" && p.jsonPath != "":
		return nil, contract.Permanent(ReasonInvalidParameter,
			errors.New(`parameters "condition" and "jsonPath" exclude each other: give one of them`))
	case p.condition == "" && p.jsonPath == "":
		return nil, contract.Permanent(ReasonInvalidParameter,
			errors.New(`give either parameter "condition" (e.g. Available) or parameters "jsonPath" and "value"`))
	case p.jsonPath != "" && p.value == "":
		return nil, invalidParam("value", `is required with "jsonPath": the value to wait for`)
	case p.condition != "" && p.value != "":
		return nil, invalidParam("value", `goes with "jsonPath", not with "condition"`)
	}
	if p.jsonPath != "" {
		text := p.jsonPath
		if !strings.Contains(text, "{") {
			text = "{" + text + "}" // accept .status.x as well as {.status.x}
		}
		p.template = jsonpath.New("jsonPath").AllowMissingKeys(true)
		if err := p.template.Parse(text); err != nil {
			return nil, invalidParam("jsonPath", "%q is not a JSONPath template such as {.status.readyReplicas}: %v", p.jsonPath, err)
		}
	}
	if p.timeout <= 0 {
		return nil, invalidParam("timeout", "%q must be positive", req.String("timeout"))
	}
	return p, nil
}

// goal describes what is waited for, for messages.
func (p *waitParams) goal() string {
	if p.condition != "" {
		return "condition " + p.condition
	}
	return fmt.Sprintf("%s to be %q", p.jsonPath, p.value)
}

// check tells whether obj meets the wait's condition, what it observed, and otherwise
// what the object shows instead.
func (p *waitParams) check(obj *unstructured.Unstructured) (met bool, observed, state string) {
	if p.template != nil {
		var buf bytes.Buffer
		if err := p.template.Execute(&buf, obj.Object); err != nil {
			return false, "", "cannot evaluate: " + err.Error()
		}
		got := strings.TrimSpace(buf.String())
		if got == strings.TrimSpace(p.value) {
			return true, p.observedWhenMet(), ""
		}
		if got == "" {
			return false, "", "not set"
		}
		return false, "", fmt.Sprintf("now %q", contract.Truncate(got, maxObserved))
	}

	generation := obj.GetGeneration()
	if og, ok := int64Field(obj.Object, "status", "observedGeneration"); ok && og < generation {
		return false, "", fmt.Sprintf("status is of generation %d, the object is at %d", og, generation)
	}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok || cond["type"] != p.condition {
			continue
		}
		status, _ := cond["status"].(string)
		if og, ok := int64Field(cond, "observedGeneration"); ok && og < generation {
			return false, "", fmt.Sprintf("now %s for generation %d, the object is at %d", status, og, generation)
		}
		if status == string(metav1.ConditionTrue) {
			return true, p.observedWhenMet(), ""
		}
		state := "now " + status
		if msg, _ := cond["message"].(string); msg != "" {
			state += ": " + contract.Truncate(msg, maxObserved)
		}
		return false, "", state
	}
	return false, "", "not reported yet"
}

// observedWhenMet is what check observes when the condition is met: the "observed"
// output, known before the wait.
func (p *waitParams) observedWhenMet() string {
	if p.template == nil {
		return string(metav1.ConditionTrue)
	}
	return contract.Truncate(strings.TrimSpace(p.value), maxObserved)
}

// int64Field reads an integer field, whichever way it was decoded.
func int64Field(obj map[string]any, fields ...string) (int64, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if !found || err != nil {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// PreCreate refuses bad parameters, a Secret among them, before Create reads anything:
// the step fails at its first hook.
func (Wait) PreCreate(_ context.Context, req *executor.Request) (contract.Result, error) {
	if _, err := parseWaitParams(req); err != nil {
		return contract.Result{}, err
	}
	return contract.Result{Done: true}, nil
}

func (Wait) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	p, err := parseWaitParams(req)
	if err != nil {
		return contract.Result{}, err
	}
	client, restMapper, err := clients(req)
	if err != nil {
		return contract.Result{}, err
	}
	// The engine tells when the wait's first call was made; a request without it (from a
	// caller other than the engine) is a first call.
	now := time.Now()
	started := req.HookStarted
	if started.IsZero() {
		started = now
	}

	mapping, err := (&mapper{m: restMapper}).mapping(p.gvk)
	if meta.IsNoMatchError(err) {
		return contract.Result{}, invalidParam("kind", "the API server serves no kind %q in %q", p.gvk.Kind, p.gvk.GroupVersion().String())
	}
	if err != nil {
		return contract.Result{}, fmt.Errorf("look up kind %s: %w", p.gvk.Kind, err)
	}
	if isSecretResource(mapping.Resource.GroupResource()) {
		return contract.Result{}, errSecretRefused()
	}
	ns := p.namespace
	if ns == "" {
		ns = req.Pipeline.Namespace
	}
	what := kindName(p.gvk.Kind, "", p.name)

	var met bool
	var observed, state string
	obj, err := resourceFor(client, mapping, ns).Get(ctx, p.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		state = "not found"
	case err != nil:
		return contract.Result{}, fmt.Errorf("wait for %s: get: %w", kindName(p.gvk.Kind, ns, p.name), err)
	default:
		met, observed, state = p.check(obj)
	}
	if met {
		return contract.DoneWithOutputs(fmt.Sprintf("%s: %s met (%s)", what, p.goal(), observed),
			map[string]string{ObservedOutput: observed}), nil
	}
	if elapsed := now.Sub(started); elapsed > p.timeout {
		return contract.Result{}, contract.Permanent(contract.ReasonTimeout,
			fmt.Errorf("%s: %s not met within %s (%s)", what, p.goal(), p.timeout, state))
	}
	return contract.Wait(waitPoll, fmt.Sprintf("%s: waiting for %s (%s)", what, p.goal(), state)), nil
}

// Plan tells what Create would wait for and how the object is now: met already, not met
// (what it shows instead), or not there yet, which an earlier step may change. It reads
// the object and nothing else. A kind the API server does not serve now, or an object the
// ServiceAccount may not read, is a warning. Its output is what Create outputs once the
// condition is met: "True", or the value waited for.
func (Wait) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	p, err := parseWaitParams(req)
	if err != nil {
		return contract.Plan{}, err
	}
	client, restMapper, err := clients(req)
	if err != nil {
		return contract.Plan{}, err
	}
	ns := p.namespace
	if ns == "" {
		ns = req.Pipeline.Namespace
	}
	what := kindName(p.gvk.Kind, "", p.name)
	// result is the plan for the object as it is now: state says it in the summary, note
	// in the row.
	result := func(state, note string, warnings ...string) contract.Plan {
		return contract.Plan{
			Summary:  fmt.Sprintf("wait up to %s for %s: %s (%s)", p.timeout, what, p.goal(), state),
			Details:  []contract.PlanItem{planItem(p.gvk.Kind, ns, p.name, actionWait, note)},
			Warnings: warnings,
			Outputs:  map[string]string{ObservedOutput: p.observedWhenMet()},
		}
	}

	mapping, err := (&mapper{m: restMapper}).mapping(p.gvk)
	if meta.IsNoMatchError(err) {
		err = invalidParam("kind", "the API server serves no kind %q in %q", p.gvk.Kind, p.gvk.GroupVersion().String())
		return result("kind not served now", "its kind is not served now", failure(err)+" (now: an earlier step may install it)"), nil
	}
	if err != nil {
		return contract.Plan{}, fmt.Errorf("look up kind %s: %w", p.gvk.Kind, err)
	}
	if isSecretResource(mapping.Resource.GroupResource()) {
		return contract.Plan{}, errSecretRefused()
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	obj, err := resourceFor(client, mapping, ns).Get(ctx, p.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return result("does not exist yet", "does not exist yet"), nil
	case apierrors.IsForbidden(err):
		err = fmt.Errorf("wait for %s: get: %w", kindName(p.gvk.Kind, ns, p.name), err)
		return result("cannot get it", "cannot get it: Forbidden", failure(err)), nil
	case err != nil:
		return contract.Plan{}, fmt.Errorf("wait for %s: get: %w", kindName(p.gvk.Kind, ns, p.name), err)
	}
	met, observed, state := p.check(obj)
	if met {
		return result("met now", fmt.Sprintf("met now (%s)", observed)), nil
	}
	return result(state, p.goal()+": "+state), nil
}

// Describe documents k8s.wait for the executor catalogue.
func (Wait) Describe() contract.Description {
	return contract.Description{
		Description: "Waits until an object has a condition that is True, or a JSONPath of it has a value.",
		Parameters: []contract.Parameter{
			{Name: "apiVersion", Type: contract.ParamString, Description: "API version of the object, e.g. apps/v1.", Required: true},
			{Name: "kind", Type: contract.ParamString, Description: "Kind of the object, e.g. Deployment; not Secret.", Required: true},
			{Name: "name", Type: contract.ParamString, Description: "Name of the object.", Required: true},
			// No default: the pipeline's namespace is known only at run time.
			{Name: "namespace", Type: contract.ParamString, Description: "Namespace of the object (default: the pipeline's)."},
			{Name: "condition", Type: contract.ParamString, Description: "Condition type that must be True, e.g. Available; or give jsonPath and value."},
			{Name: "jsonPath", Type: contract.ParamString, Description: "JSONPath template, e.g. {.status.readyReplicas}; goes with value."},
			{Name: "value", Type: contract.ParamString, Description: "What jsonPath must print."},
			{Name: "timeout", Type: contract.ParamDuration, Default: "5m", Description: "How long to wait, counted from the first call."},
		},
	}
}

var (
	_ executor.TaskExecutor = Wait{}
	_ executor.Planner      = Wait{}
)
