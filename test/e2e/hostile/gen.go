package hostile

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Env is what the generated objects may name in the cluster: the tenant's namespace and
// what lives there, and the namespace the tenant must never reach.
type Env struct {
	// Namespace is the tenant's namespace, where every object is created.
	Namespace string
	// Foreign is another tenant's namespace (the canary's).
	Foreign string
	// Nodes and ConfigMaps exist and carry BaitLabel=true, so that triggers match them.
	Nodes, ConfigMaps []string
	BaitLabel         string
	// Runner may write ConfigMaps in Namespace (test.record, k8s.apply); Watcher may list
	// and watch ConfigMaps and Nodes (a trigger's right). Tenant is the identity that applies
	// the objects. Neither runner nor watcher has both rights: a trigger on ConfigMaps whose
	// pipelines write ConfigMaps would feed itself.
	Runner, Watcher, Tenant string
	// TenantUser and TenantGroups are the tenant's identity as the API server authenticates
	// it: the ServiceAccount Tenant's username (system:serviceaccount:NS:NAME) and groups.
	// The install's admission policy admits an Approval only with spec.user TenantUser and
	// spec.groups among TenantGroups.
	TenantUser   string
	TenantGroups []string
	// Request, when set, is the request of the wait for approval of a pipeline's step as the
	// cluster has it now ("" when the step does not wait): so that Approvals can hit waits.
	// It is the one thing the objects take from the cluster rather than from the seed; the
	// generator draws the same numbers whatever it says, so a seed makes the same sequence.
	Request func(pipeline, step string) string
}

// ServiceAccounts are the ServiceAccounts of the tenant's namespace.
func (e Env) ServiceAccounts() []string {
	return []string{e.Runner, e.Watcher, e.Tenant, "default"}
}

// Mutation is one change the generator made to a base object.
type Mutation struct {
	// Class is what kind of hostility it is ("duration", "boundary-past", "yaml", ...).
	Class string
	// Where is the concrete path it changed, e.g. spec.steps[1].timeout.
	Where string
	// What describes the value, shortened.
	What string
}

func (m Mutation) String() string { return m.Where + "=" + m.What + " (" + m.Class + ")" }

// Object is one generated object.
type Object struct {
	// Index is its number in the generator's sequence, from 1.
	Index     int
	Kind      string
	Object    map[string]any
	Mutations []Mutation
}

// Name is the object's metadata.name ("" when a mutation made it something else).
func (o *Object) Name() string {
	meta, _ := o.Object["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

// String names the object and what was done to it, so that a failure can be read.
func (o *Object) String() string {
	var muts []string
	for _, m := range o.Mutations {
		muts = append(muts, m.String())
	}
	if len(muts) == 0 {
		muts = []string{"none"}
	}
	return fmt.Sprintf("#%d %s %q: %s", o.Index, o.Kind, shorten(o.Name(), 80), strings.Join(muts, "; "))
}

// Size is the length of the object's JSON encoding.
func (o *Object) Size() int {
	data, _ := json.Marshal(o.Object)
	return len(data)
}

// Generator makes hostile objects, the same sequence for the same seed, schemas and Env.
type Generator struct {
	rng     *rand.Rand
	schemas Schemas
	env     Env
	n       int
	// uniq numbers the names the generator makes up, so that they do not collide.
	uniq int
	// templates are the names of the templates generated so far, for pipelines and
	// triggers to refer to (whether or not the API server admitted them).
	templates []string
	// turns is where each corpus inTurn draws from is.
	turns map[*string]int
	// pipelines are the names of the Pipelines generated so far, for Approvals to name;
	// waits are their steps that wait for approval, as their base objects had them (a
	// pipeline of a template takes the template's), and templateWaits the templates'.
	pipelines     []string
	waits         []approvalWait
	templateWaits map[string][]string
	// users and groups are the corpora of identities, made once from the Env.
	users, groups []string
}

// approvalWait is a step of a generated pipeline that waits for approval.
type approvalWait struct{ pipeline, step string }

// NewGenerator returns a generator of objects for env from the schemas, seeded with seed.
func NewGenerator(seed uint64, schemas Schemas, env Env) *Generator {
	return &Generator{rng: rand.New(rand.NewPCG(seed, 0x686f7374696c65)), schemas: schemas, env: env}
}

// kindWeights: templates first among equals, since pipelines and triggers refer to them;
// Approvals few, since they need pipelines that wait to decide on.
var kindWeights = []weighted[string]{{KindPipeline, 45}, {KindTemplate, 25}, {KindTrigger, 30}, {KindApproval, 10}}

// Next makes the next object: a valid base object of a random kind, mutated zero to four
// times. One in ten stays valid, so that some pipelines run to the end among the others.
func (g *Generator) Next() *Object {
	g.n++
	o := &Object{Index: g.n, Kind: pickWeighted(g, kindWeights)}
	switch o.Kind {
	case KindPipeline:
		o.Object = g.basePipeline(fmt.Sprintf("p-%04d", g.n))
	case KindTemplate:
		o.Object = g.baseTemplate(fmt.Sprintf("tpl-%04d", g.n))
	case KindTrigger:
		o.Object = g.baseTrigger(fmt.Sprintf("trg-%04d", g.n))
	case KindApproval:
		o.Object = g.baseApproval(fmt.Sprintf("apr-%04d", g.n))
	}
	// The steps that wait for approval, as the base has them: mutations may change them,
	// and Approvals may then name a step that does not wait.
	waiting := g.waitingSteps(o)
	mutations := 0
	if g.rng.IntN(10) != 0 {
		mutations = 1
		for mutations < 4 && g.rng.IntN(2) == 0 {
			mutations++
		}
	}
	for range mutations {
		g.Mutate(o)
	}
	switch o.Kind {
	case KindTemplate:
		name := fmt.Sprintf("tpl-%04d", g.n)
		g.templates = append(g.templates, name)
		if len(waiting) > 0 {
			if g.templateWaits == nil {
				g.templateWaits = map[string][]string{}
			}
			g.templateWaits[name] = waiting
		}
	case KindPipeline:
		name := fmt.Sprintf("p-%04d", g.n)
		g.pipelines = append(g.pipelines, name)
		for _, step := range waiting {
			g.waits = append(g.waits, approvalWait{pipeline: name, step: step})
		}
	}
	return o
}

// waitingSteps are the names of o's steps that wait for approval: its own, or those of the
// generated template it names.
func (g *Generator) waitingSteps(o *Object) []string {
	spec, _ := o.Object["spec"].(map[string]any)
	if ref, ok := spec["templateRef"].(map[string]any); ok && o.Kind == KindPipeline {
		name, _ := ref["name"].(string)
		return g.templateWaits[name]
	}
	steps, _ := spec["steps"].([]any)
	var out []string
	for _, s := range steps {
		step, _ := s.(map[string]any)
		if _, ok := step["approval"].(map[string]any); ok {
			out = append(out, fmt.Sprint(step["name"]))
		}
	}
	return out
}

func (g *Generator) object(kind, name string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": g.schemas[kind].APIVersion(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": g.env.Namespace},
		"spec":       spec,
	}
}

// basePipeline is a valid Pipeline: its own steps, or a generated template's.
func (g *Generator) basePipeline(name string) map[string]any {
	spec := map[string]any{
		"serviceAccountName": pickWeighted(g, []weighted[string]{{g.env.Runner, 6}, {g.env.Watcher, 2}, {"default", 1}, {g.env.Tenant, 1}}),
		"params":             map[string]any{"node": g.env.Nodes[0], "cm": g.env.ConfigMaps[0]},
	}
	if len(g.templates) > 0 && g.chance(0.3) {
		spec["templateRef"] = map[string]any{"name": g.pick(g.templates)}
	} else {
		spec["steps"] = g.baseSteps()
	}
	g.basePolicies(spec)
	return g.object(KindPipeline, name, spec)
}

// baseTemplate is a valid PipelineTemplate declaring the params the bases pass.
func (g *Generator) baseTemplate(name string) map[string]any {
	spec := map[string]any{
		"params": []any{
			map[string]any{"name": "node", "required": true, "description": "the node"},
			map[string]any{"name": "cm", "default": g.env.ConfigMaps[0]},
		},
		"steps": g.baseSteps(),
	}
	if g.chance(0.2) {
		spec["onFailure"] = "Teardown"
	}
	return g.object(KindTemplate, name, spec)
}

// baseTrigger is a valid PipelineTrigger on the bait ConfigMaps or Nodes.
func (g *Generator) baseTrigger(name string) map[string]any {
	resource := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
	if g.chance(0.5) {
		resource["kind"] = "Node"
	}
	template := "missing-template"
	if len(g.templates) > 0 {
		template = g.pick(g.templates)
	}
	spec := map[string]any{
		"resource":           resource,
		"selector":           map[string]any{"matchLabels": map[string]any{g.env.BaitLabel: "true"}},
		"templateRef":        map[string]any{"name": template},
		"params":             map[string]any{"node": "$(object.metadata.name)", "cm": "$(object.metadata.name)"},
		"serviceAccountName": pickWeighted(g, []weighted[string]{{g.env.Watcher, 8}, {g.env.Runner, 1}, {"default", 1}}),
		"concurrency":        int64(1 + g.rng.IntN(3)),
	}
	if g.chance(0.3) {
		spec["whenUnmatched"] = "Delete"
	}
	if g.chance(0.3) {
		// Open now and for the next hour; mutations make it less tidy.
		spec["maintenanceWindow"] = map[string]any{"schedule": "* * * * *", "duration": "1h", "timeZone": "UTC"}
	}
	if g.chance(0.2) {
		spec["matchFields"] = []any{map[string]any{"field": "metadata.name", "operator": "Exists"}}
	}
	return g.object(KindTrigger, name, spec)
}

// baseApproval is a valid Approval as the tenant would make it: on a wait of a generated
// pipeline (a recent one more often than not), a step of a generated pipeline, or a
// pipeline that does not exist (yet), with the request the cluster has when the step waits
// and a made-up one of the right shape otherwise, as the tenant's user and some of its
// groups.
func (g *Generator) baseApproval(name string) map[string]any {
	pipeline, step := g.approvalTarget()
	spec := map[string]any{
		"pipeline": pipeline,
		"step":     step,
		"request":  g.requestOf(pipeline, step),
		"decision": pickWeighted(g, []weighted[string]{{string(v1alpha1.ApprovalApprove), 3}, {string(v1alpha1.ApprovalReject), 1}}),
		"user":     g.env.TenantUser,
	}
	if g.chance(0.7) {
		spec["comment"] = g.pick([]string{"lgtm", "checked the plan", "not now: freeze", "rejected: wrong node"})
	}
	if len(g.env.TenantGroups) > 0 && g.chance(0.2) {
		var groups []any
		for _, group := range g.env.TenantGroups {
			if g.chance(0.5) {
				groups = append(groups, group)
			}
		}
		if len(groups) > 0 {
			spec["groups"] = groups
		}
	}
	return g.object(KindApproval, name, spec)
}

// approvalTarget is the pipeline and step a base Approval decides on.
func (g *Generator) approvalTarget() (pipeline, step string) {
	switch {
	case len(g.waits) > 0 && g.chance(0.7):
		// Recent waits are more likely to be waiting still.
		i := g.rng.IntN(len(g.waits))
		if g.chance(0.7) {
			i = len(g.waits) - 1 - g.rng.IntN(min(len(g.waits), 8))
		}
		return g.waits[i].pipeline, g.waits[i].step
	case len(g.pipelines) > 0 && g.chance(0.7):
		return g.pick(g.pipelines), fmt.Sprintf("s%d", g.rng.IntN(3))
	}
	// A pipeline that may come later, or never.
	return fmt.Sprintf("p-%04d", g.n+1+g.rng.IntN(50)), "s0"
}

// requestOf is the request of the wait of pipeline's step, as Env.Request says, else a
// made-up one of the right shape. It draws the same numbers either way.
func (g *Generator) requestOf(pipeline, step string) string {
	madeUp := strconv.FormatUint(g.rng.Uint64(), 16)
	if g.env.Request == nil {
		return madeUp
	}
	if r := g.env.Request(pipeline, step); r != "" && g.fits(KindApproval, "spec.request", r) {
		return r
	}
	return madeUp
}

// someRequest is the request of a generated wait (another one than the Approval names,
// most likely), or a made-up one.
func (g *Generator) someRequest() string {
	w := approvalWait{pipeline: "missing", step: "s0"}
	if len(g.waits) > 0 {
		w = g.waits[g.rng.IntN(len(g.waits))]
	}
	return g.requestOf(w.pipeline, w.step)
}

// fits tells whether v is a valid string at path of kind, by its schema's pattern and
// lengths.
func (g *Generator) fits(kind, path, v string) bool {
	for _, f := range g.schemas[kind].Fields {
		if f.String() != path {
			continue
		}
		b := BoundsOf(f.Schema())
		return b.Matches(v) && (b.MaxLength == nil || int64(len(v)) <= *b.MaxLength) &&
			(b.MinLength == nil || int64(len(v)) >= *b.MinLength)
	}
	return false
}

func (g *Generator) basePolicies(spec map[string]any) {
	if g.chance(0.2) {
		spec["onFailure"] = "Teardown"
	}
	if g.chance(0.2) {
		spec["updatePolicy"] = "Rerun"
	}
	if g.chance(0.05) {
		spec["suspend"] = true
	}
	if g.chance(0.05) {
		spec["dryRun"] = true
	}
}

// baseExecutors are the executors of base steps: those the operator of the suite offers,
// and one it does not.
var baseExecutors = []weighted[string]{
	{"test.noop", 4}, {"test.record", 2}, {"k8s.apply", 2}, {"k8s.wait", 1}, {"node.drain", 1}, {"no.such.executor", 1},
}

// baseSteps are one to three valid steps named s0, s1, ...
func (g *Generator) baseSteps() []any {
	n := 1 + g.rng.IntN(3)
	steps := make([]any, 0, n)
	for i := range n {
		executor := pickWeighted(g, baseExecutors)
		step := map[string]any{"name": fmt.Sprintf("s%d", i), "executor": executor}
		if with := g.baseParams(executor); with != nil {
			step["with"] = with
		}
		if g.chance(0.3) {
			step["timeout"] = "1m"
		}
		if g.chance(0.3) {
			// Short, so that failing steps settle within the run.
			step["retry"] = map[string]any{"limit": int64(1), "backoff": map[string]any{"initial": "1s", "factor": int64(2), "max": "2s"}}
		}
		steps = append(steps, step)
	}
	if g.chance(0.2) {
		steps[g.rng.IntN(n)].(map[string]any)["approval"] = g.baseApprovalPolicy()
	}
	return steps
}

// baseApprovalPolicy is a valid approval of a step: one to three approvers, now and then
// only named ones or not the pipeline's creator (the tenant, whose decisions then do not
// count), with a short deadline or none (the step waits until the pipeline goes).
func (g *Generator) baseApprovalPolicy() map[string]any {
	policy := map[string]any{}
	if g.chance(0.6) {
		policy["approvals"] = int64(1 + g.rng.IntN(3))
	}
	if g.chance(0.4) {
		// Short, so that a wait no one answers fails within the run.
		policy["deadline"] = g.pick([]string{"2s", "5s"})
	}
	if g.chance(0.25) {
		policy["fourEyes"] = true
	}
	switch g.rng.IntN(8) {
	case 0:
		policy["users"] = []any{g.env.TenantUser}
	case 1:
		policy["users"] = []any{"someone-else"}
	case 2:
		if len(g.env.TenantGroups) > 0 {
			policy["groups"] = []any{g.pick(g.env.TenantGroups)}
		}
	}
	return policy
}

// baseParams are valid parameters of executor, referring to the params the bases declare.
func (g *Generator) baseParams(executor string) map[string]any {
	switch executor {
	case "test.noop":
		return map[string]any{"x": "$(params.node)"}
	case "test.record":
		return map[string]any{"output": "$(params.cm)"}
	case "k8s.apply":
		return map[string]any{"manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + g.hostileName() + "\ndata:\n  node: $(params.node)\n"}
	case "k8s.wait":
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "$(params.cm)", "jsonPath": "{.data.k}", "value": "v", "timeout": "30s"}
	case "node.drain":
		return map[string]any{"node": "$(params.node)", "timeout": "30s"}
	default:
		return map[string]any{"x": "y"}
	}
}

// hostileName is a new name for an object a step creates: the suite looks for names with
// this prefix outside the tenant's namespace.
func (g *Generator) hostileName() string {
	g.uniq++
	return fmt.Sprintf("hostile-%d", g.uniq)
}

// valid is a valid value for the field, made of its required properties only.
func (g *Generator) valid(f Field) any {
	s := f.Schema()
	b := BoundsOf(s)
	switch s.Type {
	case "object":
		m := map[string]any{}
		if s.AdditionalProperties != nil {
			return m
		}
		for _, name := range slices.Sorted(slices.Values(s.Required)) {
			child, ok := s.Properties[name]
			if !ok {
				continue
			}
			m[name] = g.valid(f.child(PathStep{Name: name, Kind: StepProp, Schema: &child}))
		}
		return m
	case "array":
		n := 1
		if b.MinItems != nil && int(*b.MinItems) > n {
			n = int(*b.MinItems)
		}
		a := make([]any, n)
		for i := range a {
			a[i] = g.valid(f.child(PathStep{Kind: StepItem, Schema: s.Items.Schema}))
		}
		return a
	case "integer":
		switch {
		case b.Minimum != nil && *b.Minimum > 1:
			return *b.Minimum
		case b.Maximum != nil && *b.Maximum < 1:
			return *b.Maximum
		}
		return int64(1)
	case "boolean":
		return false
	case "string":
		return g.validString(f)
	}
	return nil
}

// validString is a valid string for the field: one its meaning calls for, else a fresh
// name that fits its pattern and lengths.
func (g *Generator) validString(f Field) string {
	switch classify(f) {
	case classDuration:
		return "1s"
	case classCron:
		return "0 3 * * *"
	case classTimeZone:
		return "UTC"
	case classServiceAccount:
		return g.env.Runner
	case classExecutor:
		return "test.noop"
	case classTemplateRef:
		if len(g.templates) > 0 {
			return g.pick(g.templates)
		}
		return "missing-template"
	case classAPIVersion:
		return "v1"
	case classKind:
		return "ConfigMap"
	case classFieldPath:
		return "metadata.name"
	case classLabelKey:
		return g.env.BaitLabel
	case classSelectorOp:
		return "Exists"
	case classUser:
		if g.env.TenantUser != "" {
			return g.env.TenantUser
		}
	case classGroup:
		if len(g.env.TenantGroups) > 0 {
			return g.env.TenantGroups[0]
		}
	case classApprovalTarget:
		if len(g.pipelines) > 0 {
			return g.pick(g.pipelines)
		}
	case classStepRef:
		return "s0"
	case classRequest:
		return g.someRequest()
	}
	b := BoundsOf(f.Schema())
	if len(b.Enum) > 0 {
		return b.Enum[0]
	}
	g.uniq++
	v := fmt.Sprintf("v%d", g.uniq)
	if b.Matches(v) && (b.MaxLength == nil || int64(len(v)) <= *b.MaxLength) {
		return v
	}
	n := 1
	if b.MinLength != nil && *b.MinLength > 1 {
		n = int(*b.MinLength)
	}
	if s, ok := fill(n, b); ok {
		return s
	}
	return v
}

func (f Field) child(s PathStep) Field {
	return Field{Path: append(slices.Clone(f.Path), s)}
}

// fill is a string of n characters that fits b's pattern if one of the fillers does
// (ok), else n letters a.
func fill(n int, b Bounds) (string, bool) {
	if n <= 0 {
		return "", b.Matches("")
	}
	candidates := []string{
		strings.Repeat("a", n),
		strings.Repeat("0", max(0, n-2)) + "1s"[max(0, 2-n):], // a short duration, long
		strings.Repeat("1", n-1) + "s",                        // a huge duration
		"A" + strings.Repeat("a", n-1),                        // a CamelCase name
		"_" + strings.Repeat("a", n-1),
	}
	for _, c := range candidates {
		if b.Matches(c) {
			return c, true
		}
	}
	return candidates[0], false
}

// Classes of field, by meaning: each has its own corpus of values.
const (
	classGeneric        = "generic"
	classDuration       = "duration"
	classCron           = "cron"
	classTimeZone       = "timezone"
	classServiceAccount = "service-account"
	classExecutor       = "executor"
	classTemplateRef    = "template-ref"
	classAPIVersion     = "trigger-resource"
	classKind           = "trigger-kind"
	classFieldPath      = "field-path"
	classLabelKey       = "label-key"
	classSelectorOp     = "selector-operator"
	classParamValue     = "param-value"
	classUser           = "user"
	classGroup          = "group"
	classApprovalTarget = "approval-target"
	classStepRef        = "step-ref"
	classRequest        = "approval-request"
	classComment        = "comment"
)

// classify says what a field means, from its name and schema: a duration by its pattern
// (which takes 1h30m and 1.5h but not 1d), the others by name.
func classify(f Field) string {
	s := f.Schema()
	last := f.Path[len(f.Path)-1]
	if s.Type == "string" {
		if b := BoundsOf(s); b.Pattern != nil && isDurationPattern(b) {
			return classDuration
		}
		if last.Kind == StepValue {
			switch f.Name() {
			case "params", "with":
				return classParamValue
			}
			return classGeneric
		}
		// Of Approvals and approval policies, and who pauses or resumes a trigger.
		switch name, parent := f.Name(), f.Parent(); {
		case name == "user" || name == "users" || (name == "by" && (parent == "pause" || parent == "resume")):
			return classUser
		case name == "groups":
			return classGroup
		case name == "pipeline":
			return classApprovalTarget
		case name == "step":
			return classStepRef
		case name == "request":
			return classRequest
		case name == "comment":
			return classComment
		}
	}
	switch name, parent := f.Name(), f.Parent(); {
	case name == "schedule":
		return classCron
	case name == "timeZone":
		return classTimeZone
	case name == "serviceAccountName":
		return classServiceAccount
	case name == "executor":
		return classExecutor
	case name == "name" && parent == "templateRef":
		return classTemplateRef
	case name == "apiVersion" && parent == "resource":
		return classAPIVersion
	case name == "kind" && parent == "resource":
		return classKind
	case name == "field" && parent == "matchFields":
		return classFieldPath
	case name == "key" && parent == "matchExpressions":
		return classLabelKey
	case name == "operator" && parent == "matchExpressions":
		return classSelectorOp
	}
	return classGeneric
}

func isDurationPattern(b Bounds) bool {
	for _, ok := range []string{"0s", "1ns", "1.5h", "1h30m"} {
		if !b.Matches(ok) {
			return false
		}
	}
	return !b.Matches("1d") && !b.Matches("abc")
}

// weighted is a choice with its weight.
type weighted[T any] struct {
	v T
	w int
}

func pickWeighted[T any](g *Generator, choices []weighted[T]) T {
	total := 0
	for _, c := range choices {
		total += c.w
	}
	n := g.rng.IntN(total)
	for _, c := range choices {
		if n < c.w {
			return c.v
		}
		n -= c.w
	}
	return choices[len(choices)-1].v
}

func (g *Generator) pick(s []string) string { return s[g.rng.IntN(len(s))] }

// inTurn gives a corpus's values in turn, from a random start: a run draws every one
// before any twice, where a random pick can miss one as the schemas grow new fields and
// the draws go elsewhere.
func (g *Generator) inTurn(s []string) string {
	if g.turns == nil {
		g.turns = map[*string]int{}
	}
	k := &s[0]
	i, ok := g.turns[k]
	if !ok {
		i = g.rng.IntN(len(s))
	}
	g.turns[k] = i + 1
	return s[i%len(s)]
}

func (g *Generator) chance(p float64) bool { return g.rng.Float64() < p }

// shorten quotes s for a report, cut to n bytes with its full length said.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", strings.ToValidUTF8(s[:n], ""), len(s))
}

// Followup is what the suite does with an object the API server admitted.
type Followup int

const (
	// FollowNone leaves it to the operator.
	FollowNone Followup = iota
	// FollowUpdate updates it with one more mutation (transition rules, a spec that
	// changes under a running pipeline).
	FollowUpdate
	// FollowDelete deletes it at once, racing the operator's first look.
	FollowDelete
)

// Followup draws what to do with the object just admitted.
func (g *Generator) Followup() Followup {
	return pickWeighted(g, []weighted[Followup]{{FollowNone, 80}, {FollowUpdate, 14}, {FollowDelete, 6}})
}
