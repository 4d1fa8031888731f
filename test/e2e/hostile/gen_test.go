package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	sigsyaml "sigs.k8s.io/yaml"
)

// The generator's own tests run without a cluster: `go test -run Generator`.

func testEnv() Env {
	return Env{
		Namespace: "tenant", Foreign: "canary",
		Nodes: []string{"bait-node-0"}, ConfigMaps: []string{"bait-0"}, BaitLabel: "hostile.stepwise.dev/bait",
		Runner: "runner", Watcher: "watcher", Tenant: "tenant",
		TenantUser:   "system:serviceaccount:tenant:tenant",
		TenantGroups: []string{"system:serviceaccounts", "system:serviceaccounts:tenant", "system:authenticated"},
	}
}

func loadTestSchemas(t *testing.T) Schemas {
	t.Helper()
	dir, err := CRDDir()
	require.NoError(t, err)
	s, err := LoadSchemas(dir)
	require.NoError(t, err)
	return s
}

func generate(t *testing.T, seed uint64, n int) []*Object {
	t.Helper()
	g := NewGenerator(seed, loadTestSchemas(t), testEnv())
	out := make([]*Object, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

func TestGeneratorIsDeterministic(t *testing.T) {
	encode := func(objs []*Object) []string {
		out := make([]string, len(objs))
		for i, o := range objs {
			data, err := json.Marshal(o.Object)
			require.NoError(t, err)
			out[i] = string(data) + fmt.Sprint(o.Mutations)
		}
		return out
	}
	a, b := encode(generate(t, 7, 300)), encode(generate(t, 7, 300))
	require.Equal(t, a, b, "the same seed must make the same objects")
	assert.NotEqual(t, a, encode(generate(t, 8, 300)), "another seed must make other objects")
}

// TestGeneratorRequestsDoNotChangeTheSequence: what Env.Request says (the cluster's waits)
// changes the requests of Approvals, never the sequence: a seed repeats the same objects
// and mutations whatever the cluster's state.
func TestGeneratorRequestsDoNotChangeTheSequence(t *testing.T) {
	schemas := loadTestSchemas(t)
	shape := func(objs []*Object) []string {
		out := make([]string, len(objs))
		for i, o := range objs {
			var where []string
			for _, m := range o.Mutations {
				where = append(where, m.Class+"@"+m.Where)
			}
			out[i] = o.Kind + " " + o.Name() + " " + strings.Join(where, ",")
		}
		return out
	}
	run := func(env Env) []*Object {
		g := NewGenerator(11, schemas, env)
		out := make([]*Object, 600)
		for i := range out {
			out[i] = g.Next()
		}
		return out
	}
	cold := run(testEnv())
	env := testEnv()
	asked := 0
	env.Request = func(pipeline, step string) string {
		asked++
		if asked%2 == 0 {
			return "" // not waiting (yet)
		}
		return "feedface" + step
	}
	warm := run(env)
	require.Equal(t, shape(cold), shape(warm), "the cluster's answers must not change the sequence")
	hits := 0
	for _, o := range warm {
		if o.Kind != KindApproval || len(o.Mutations) > 0 {
			continue
		}
		spec := o.Object["spec"].(map[string]any)
		if spec["request"] == "feedface"+spec["step"].(string) {
			hits++
		}
	}
	assert.Positive(t, asked, "the generator never asked for a wait's request")
	assert.Positive(t, hits, "no base Approval took the request the cluster gave")
}

// TestGeneratorBaseApprovals: base pipelines and templates sometimes have a step that
// waits for approval, and a base Approval is the tenant's, on a generated pipeline (a wait
// of one, mostly) or a made-up one, with a request of the right shape.
func TestGeneratorBaseApprovals(t *testing.T) {
	env := testEnv()
	g := NewGenerator(5, loadTestSchemas(t), env)
	waiting, bases := 0, 0
	pipelines := map[string]bool{}
	onWaits := 0
	waits := map[string]bool{}
	requestShape := regexp.MustCompile(`^[a-z0-9]{1,64}$`)
	for range 3000 {
		o := g.Next()
		switch o.Kind {
		case KindPipeline:
			pipelines[fmt.Sprintf("p-%04d", o.Index)] = true
		case KindApproval:
			if len(o.Mutations) > 0 {
				continue
			}
			spec := o.Object["spec"].(map[string]any)
			assert.Equal(t, env.TenantUser, spec["user"], o.String())
			if groups, ok := spec["groups"].([]any); ok {
				for _, group := range groups {
					assert.Contains(t, env.TenantGroups, group, o.String())
				}
			}
			assert.Regexp(t, requestShape, spec["request"], o.String())
			assert.Contains(t, []any{"Approve", "Reject"}, spec["decision"], o.String())
			pipeline := spec["pipeline"].(string)
			if !pipelines[pipeline] {
				assert.Regexp(t, `^p-\d{4}$`, pipeline, "a made-up pipeline: %s", o)
			}
			if waits[pipeline+"/"+spec["step"].(string)] {
				onWaits++
			}
			bases++
		}
		for _, w := range g.waits {
			waits[w.pipeline+"/"+w.step] = true
		}
	}
	assert.Greater(t, bases, 10, "base Approvals")
	assert.Greater(t, onWaits, bases/3, "base Approvals on a step that waits: %d of %d", onWaits, bases)

	for range 1000 {
		steps := g.baseSteps()
		for _, s := range steps {
			if _, ok := s.(map[string]any)["approval"]; ok {
				waiting++
				break
			}
		}
	}
	assert.InDelta(t, 200, waiting, 60, "about one base step list in five has a step that waits for approval")
}

// TestGeneratorReadsBoundsFromTheCRD: the bounds come from the schema at run time; a
// tightened CRD changes the values without a change here.
func TestGeneratorReadsBoundsFromTheCRD(t *testing.T) {
	schemas := loadTestSchemas(t)
	field := func(kind, path string) Field {
		for _, f := range schemas[kind].Fields {
			if f.String() == path {
				return f
			}
		}
		t.Fatalf("no field %s in %s", path, kind)
		return Field{}
	}
	g := NewGenerator(1, schemas, testEnv())

	steps := field(KindPipeline, "spec.steps")
	seven := int64(7)
	steps.Schema().MaxItems = &seven
	lengths := map[int]bool{}
	for range 200 {
		if v, class := g.hostileArray(steps, BoundsOf(steps.Schema())); strings.HasPrefix(class, "boundary") {
			lengths[len(v.([]any))] = true
		}
	}
	// At maxItems and one past it, as changed here, and one short of minItems.
	assert.Equal(t, map[int]bool{0: true, 7: true, 8: true}, lengths)

	sa := field(KindPipeline, "spec.serviceAccountName")
	ten := int64(10)
	sa.Schema().MaxLength = &ten
	sizes := map[int]bool{}
	for range 300 {
		if v, class := g.hostileString(BoundsOf(sa.Schema())); class == "boundary-at" || class == "boundary-past" {
			sizes[len(v.(string))] = true
			if class == "boundary-at" {
				assert.True(t, BoundsOf(sa.Schema()).Matches(v.(string)), "a value at the bound fits the pattern: %q", v)
			}
		}
	}
	assert.Equal(t, map[int]bool{10: true, 11: true}, sizes)

	// The bounds on a map's keys and values are read from its CEL rule.
	for _, kind := range []string{KindPipeline, KindTrigger} {
		b := BoundsOf(field(kind, "spec.params").Schema())
		require.NotNil(t, b.KeyMax, kind)
		require.NotNil(t, b.ValueMax, kind)
		assert.Positive(t, *b.KeyMax)
		assert.Greater(t, *b.ValueMax, *b.KeyMax)
	}
}

func TestGeneratorCELSizeBounds(t *testing.T) {
	tests := []struct {
		rule       string
		key, value int64 // -1: none
	}{
		{rule: "self.all(k, size(k) <= 253 && size(self[k]) <= 65536)", key: 253, value: 65536},
		{rule: "self.all(name, size(self[name]) <= 10)", key: -1, value: 10},
		{rule: "self.all(k, size(k) < 5)", key: 4, value: -1},
		{rule: "has(self.steps) != has(self.templateRef)", key: -1, value: -1},
	}
	for _, tt := range tests {
		key, value := celSizeBounds(tt.rule)
		deref := func(p *int64) int64 {
			if p == nil {
				return -1
			}
			return *p
		}
		assert.Equal(t, tt.key, deref(key), tt.rule)
		assert.Equal(t, tt.value, deref(value), tt.rule)
	}
}

// TestGeneratorCoversTheHostileClasses: a run of the size of `make hostile` has every kind
// of hostility the suite promises, and the corpora's landmarks.
func TestGeneratorCoversTheHostileClasses(t *testing.T) {
	objs := generate(t, 1, 3000)
	classes := map[string]int{}
	kinds := map[string]int{}
	// Landmarks: values that must appear as they are, and fragments of values.
	values := map[string]bool{
		"CRON_TZ=Europe/Paris 0 3 * * *": false, "TZ=UTC 0 3 * * *": false, "@every 1s": false, "0 0 3 * * *": false,
		"9999999999h": false, "1h30m": false, "1.5h": false, "1µs": false, "1us": false, "-1s": false, "1ns": false, "": false,
		"Local": false, "../../etc/passwd": false, "Europe/Paris": false,
		"test.noop": false, "test.record": false, "node.drain": false, "k8s.apply": false, "k8s.wait": false, "no.such.executor": false,
		"ConfigMap": false, "Node": false, "$(object.metadata.name)": false,
		// Approvals: the tenant, forged users and groups, both decisions.
		testEnv().TenantUser: false, "system:serviceaccount:tenant:runner": false, "system:serviceaccount:canary:default": false,
		"system:admin": false, "system:masters": false, "system:serviceaccounts:tenant": false, "Approve": false, "Reject": false,
		strings.Repeat("c", 1025): false, strings.Repeat("😀", 1024): false,
	}
	fragments := map[string]bool{
		"*l8": false, "%TAG": false, "!!python": false, "<<: *b": false, "---\napiVersion": false, // YAML
		"$(steps.s0.outputs.value)": false, "$(params.big)": false, "$(object.": false, // references
		"\x00": false, "😀": false, // control and non-ASCII characters
	}
	sawWord := false
	var visit func(v any)
	visit = func(v any) {
		switch v := v.(type) {
		case string:
			if _, ok := values[v]; ok {
				values[v] = true
			}
			for f, seen := range fragments {
				if !seen && strings.Contains(v, f) {
					fragments[f] = true
				}
			}
			sawWord = sawWord || strings.Contains(strings.ToLower(v), "panic")
		case []any:
			for _, x := range v {
				visit(x)
			}
		case map[string]any:
			for k, x := range v {
				visit(k)
				visit(x)
			}
		}
	}
	refs := 0
	templates := map[string]bool{}
	// The approval of steps is mutated from the schema walk, as any field: by kind, the
	// fields of spec.steps[].approval mutated.
	stepApprovals := map[string]map[string]bool{}
	for _, o := range objs {
		kinds[o.Kind]++
		for _, m := range o.Mutations {
			classes[strings.SplitN(m.Class, ":", 2)[0]]++
			if _, rest, ok := strings.Cut(m.Where, "].approval"); ok && strings.HasPrefix(m.Where, "spec.steps[") {
				if stepApprovals[o.Kind] == nil {
					stepApprovals[o.Kind] = map[string]bool{}
				}
				field, _, _ := strings.Cut(strings.TrimPrefix(rest, "."), "[")
				stepApprovals[o.Kind][field] = true
			}
		}
		visit(o.Object)
		if o.Kind == KindTemplate {
			templates[o.Name()] = true
		}
		spec, _ := o.Object["spec"].(map[string]any)
		if ref, _ := spec["templateRef"].(map[string]any); ref != nil && templates[fmt.Sprint(ref["name"])] {
			refs++
		}
	}
	// Each kind by its weight: at least 80% of its expected share.
	total := 0
	for _, w := range kindWeights {
		total += w.w
	}
	for _, w := range kindWeights {
		assert.Greater(t, kinds[w.v], len(objs)*w.w*8/(total*10), "%s in %v", w.v, kinds)
	}
	assert.Len(t, kinds, len(Kinds), "kinds generated: %v", kinds)
	for _, class := range []string{
		classDuration, classCron, classTimeZone, classServiceAccount, classExecutor, classTemplateRef,
		classAPIVersion, classKind, classFieldPath, classLabelKey, classSelectorOp,
		classUser, classGroup, classApprovalTarget, classStepRef, classRequest, classComment,
		"boundary-at", "boundary-past", "enum", "non-enum", "pattern-miss", "odd-string", "non-ascii-max",
		"reference", "object-reference", "amplification", "yaml", "size-max", "metadata", "remove", "duplicate",
		"forged-status", "unknown-field", "type", "jsonpath", "selector", "object-name", "int-param", "bool-param",
	} {
		assert.Positive(t, classes[class], "no mutation of class %s in %v", class, classes)
	}
	for v, seen := range values {
		assert.True(t, seen, "no value %q", v)
	}
	for f, seen := range fragments {
		assert.True(t, seen, "no value with %q", f)
	}
	for _, kind := range []string{KindPipeline, KindTemplate} {
		for _, field := range []string{"approvals", "deadline", "fourEyes", "users", "groups"} {
			assert.True(t, stepApprovals[kind][field], "%s: no mutation of spec.steps[].approval.%s (%v)", kind, field, stepApprovals[kind])
		}
	}
	assert.Greater(t, refs, 100, "pipelines and triggers referring to generated templates")
	// The suite greps the operator's log for this word: no generated value may bring it.
	assert.False(t, sawWord, "a generated value holds the word the operator's log is searched for")
}

// TestGeneratorObjectsAreMostlyNearValid runs the CRDs' own validation (schema and CEL
// rules, as the API server does at admission) on generated objects: the unmutated ones
// must all pass, and a fair share of the mutated ones too, or the suite tests admission
// only, not the operator.
func TestGeneratorObjectsAreMostlyNearValid(t *testing.T) {
	dir, err := CRDDir()
	require.NoError(t, err)
	validators := map[string]func(map[string]any) error{}
	for _, kind := range Kinds {
		validators[kind] = newLocalValidator(t, dir, kind)
	}
	admitted, total := map[string]int{}, map[string]int{}
	// 500 objects measure the shares well enough (the bounds are wide): each is validated
	// with CEL, which costs most of the test's time, several times over under -race.
	for _, o := range generate(t, 3, 500) {
		// Round-trip through JSON as the API server sees it: int64 becomes a number.
		var obj map[string]any
		data, err := json.Marshal(o.Object)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &obj))
		err = validators[o.Kind](obj)
		if len(o.Mutations) == 0 {
			require.NoError(t, err, "a base object must be valid: %s", o)
		}
		total[o.Kind]++
		if err == nil {
			admitted[o.Kind]++
		}
	}
	for _, kind := range Kinds {
		share := float64(admitted[kind]) / float64(total[kind])
		t.Logf("%s: %d of %d pass the CRD's validation (%.0f%%)", kind, admitted[kind], total[kind], 100*share)
		assert.Greater(t, share, 0.25, "%s: too few near-valid objects", kind)
		assert.Less(t, share, 0.9, "%s: too few hostile objects", kind)
	}
}

// newLocalValidator validates an object of kind against its CRD's schema and CEL rules.
func newLocalValidator(t *testing.T, dir, kind string) func(map[string]any) error {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var v1 apiextensionsv1.CustomResourceDefinition
		require.NoError(t, sigsyaml.Unmarshal(data, &v1))
		if v1.Spec.Names.Kind != kind {
			continue
		}
		var crd apiextensions.CustomResourceDefinition
		require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil))
		props := crd.Spec.Validation.OpenAPIV3Schema
		require.NotNil(t, props, kind)
		schemaValidator, _, err := validation.NewSchemaValidator(props)
		require.NoError(t, err)
		structural, err := structuralschema.NewStructural(props)
		require.NoError(t, err)
		celValidator := cel.NewValidator(structural, true, celconfig.PerCallLimit)
		return func(obj map[string]any) error {
			if errs := validation.ValidateCustomResource(nil, obj, schemaValidator); len(errs) > 0 {
				return errs.ToAggregate()
			}
			celErrs, _ := celValidator.Validate(context.Background(), nil, structural, obj, nil, celconfig.RuntimeCELCostBudget)
			return celErrs.ToAggregate()
		}
	}
	t.Fatalf("no CRD of kind %s in %s", kind, dir)
	return nil
}
