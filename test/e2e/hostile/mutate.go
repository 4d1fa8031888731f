package hostile

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// strategies: how Mutate changes an object, by weight.
var strategies = []weighted[func(*Generator, *Object)]{
	{(*Generator).mutateField, 40},
	{(*Generator).mutateParam, 18},
	{(*Generator).mutateManifest, 8},
	{(*Generator).mutateWindow, 5},
	{(*Generator).mutateReferences, 10},
	{(*Generator).mutateMetadata, 8},
	{(*Generator).mutateSize, 3},
	{(*Generator).removeField, 6},
	{(*Generator).mutateStructure, 6},
}

// Mutate changes o in one place and records how.
func (g *Generator) Mutate(o *Object) {
	pickWeighted(g, strategies)(g, o)
}

func (o *Object) record(class, where string, v any) {
	o.Mutations = append(o.Mutations, Mutation{Class: class, Where: where, What: describe(v)})
}

// describe shows a value shortly: strings quoted and cut, the rest by type and size.
func describe(v any) string {
	switch v := v.(type) {
	case removal:
		return "<removed>"
	case string:
		return fmt.Sprintf("%q", shorten(v, 60))
	case []any:
		return fmt.Sprintf("<%d items>", len(v))
	case map[string]any:
		return fmt.Sprintf("<%d entries>", len(v))
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", v)
}

// removal, as a value to put, deletes the field.
type removal struct{}

// mutateField puts a hostile value, chosen by the field's schema and meaning, at a field
// of the schema. Fields with a meaning (durations, schedules, ...) weigh more than the
// generic ones, which are many.
func (g *Generator) mutateField(o *Object) {
	fields := g.schemas[o.Kind].Fields
	choices := make([]weighted[Field], len(fields))
	for i, f := range fields {
		w := 1
		if classify(f) != classGeneric {
			w = 3
		}
		choices[i] = weighted[Field]{f, w}
	}
	f := pickWeighted(g, choices)
	v, class := g.hostileValue(f)
	o.record(class, g.put(o.Object, f, v), v)
}

// hostileValue is a value for f: from the corpus of its meaning four times in five, else
// one chosen by its schema's type and bounds.
func (g *Generator) hostileValue(f Field) (any, string) {
	s := f.Schema()
	b := BoundsOf(s)
	if c := classify(f); c != classGeneric && g.rng.IntN(5) != 0 {
		switch c {
		case classDuration:
			return g.duration(b), c
		case classCron:
			return g.inTurn(cronSchedules), c
		case classTimeZone:
			if g.chance(0.2) && b.MaxLength != nil {
				v, _ := fill(int(*b.MaxLength)+g.rng.IntN(2), b)
				return v, c
			}
			return g.inTurn(timeZones), c
		case classServiceAccount:
			return g.pick(g.serviceAccountNames()), c
		case classExecutor:
			return g.inTurn(executorNames), c
		case classTemplateRef:
			return g.templateRef(), c
		case classAPIVersion:
			return g.pick(apiVersions), c
		case classKind:
			return g.pick(resourceKinds), c
		case classFieldPath:
			return g.pick(fieldPaths), c
		case classLabelKey:
			return g.pick(labelKeys), c
		case classSelectorOp:
			return g.pick(selectorOperators), c
		case classUser:
			return g.inTurn(g.userNames()), c
		case classGroup:
			return g.inTurn(g.groupNames()), c
		case classApprovalTarget:
			return g.pick(g.approvalTargets()), c
		case classStepRef:
			return g.inTurn(stepRefs), c
		case classRequest:
			return g.approvalRequest(), c
		case classComment:
			return g.inTurn(comments), c
		case classParamValue:
			// The bound on a value is the map's (its CEL rule), or the value's own.
			max := BoundsOf(f.Path[len(f.Path)-2].Schema).ValueMax
			if b.MaxLength != nil && (max == nil || *b.MaxLength < *max) {
				max = b.MaxLength
			}
			return g.paramValue(max)
		}
	}
	switch s.Type {
	case "string":
		return g.hostileString(b)
	case "integer":
		return g.hostileInt(s.Format, b)
	case "boolean":
		return []any{true, false, "true", int64(1), nil}[g.rng.IntN(5)], "type"
	case "array":
		return g.hostileArray(f, b)
	case "object":
		if s.AdditionalProperties != nil {
			return g.hostileMap(b)
		}
		return []any{nil, map[string]any{}, "object", int64(1), []any{}}[g.rng.IntN(5)], "type"
	}
	return nil, "type"
}

// duration is a duration from the corpus, or one at or just past the bounds of the
// field's CEL rule or its maxLength.
func (g *Generator) duration(b Bounds) string {
	var options []string
	if b.DurationMax != nil {
		options = append(options, b.DurationMax.String(), (*b.DurationMax + time.Nanosecond).String())
	}
	if b.DurationMin != nil {
		options = append(options, b.DurationMin.String(), (*b.DurationMin - time.Nanosecond).String())
	}
	if b.MaxLength != nil {
		at, _ := fill(int(*b.MaxLength), b)
		past, _ := fill(int(*b.MaxLength)+1, b)
		options = append(options, at, past)
	}
	if len(options) > 0 && g.chance(0.3) {
		return g.pick(options)
	}
	return g.inTurn(durations)
}

// templateRef names a generated template, one never generated, or an odd name.
func (g *Generator) templateRef() string {
	switch {
	case len(g.templates) > 0 && g.chance(0.5):
		return g.pick(g.templates)
	case g.chance(0.5):
		return fmt.Sprintf("tpl-%04d", g.n+1+g.rng.IntN(50)) // one that may come later
	}
	return g.pick([]string{"missing", "TPL", "tpl/../x", strings.Repeat("t", 253), strings.Repeat("t", 254), "", "é"})
}

// hostileString is a string at or just past the bounds, off the enum or the pattern, odd,
// or a reference.
func (g *Generator) hostileString(b Bounds) (any, string) {
	type option func() (any, string)
	options := []option{
		func() (any, string) { return g.pick(oddStrings), "odd-string" },
		func() (any, string) { return g.pick(references), "reference" },
	}
	if b.MaxLength != nil {
		max := int(*b.MaxLength)
		options = append(options,
			func() (any, string) { v, _ := fill(max, b); return v, "boundary-at" },
			func() (any, string) { v, _ := fill(max+1, b); return v, "boundary-past" },
			func() (any, string) {
				return strings.Repeat(g.pick([]string{"é", "€", "😀"}), max), "non-ascii-max"
			},
		)
	} else {
		options = append(options, func() (any, string) {
			v, _ := fill(1<<(10+g.rng.IntN(8)), b) // 1 KiB to 128 KiB
			return v, "unbounded"
		})
	}
	if b.MinLength != nil && *b.MinLength > 0 {
		min := int(*b.MinLength)
		options = append(options,
			func() (any, string) { v, _ := fill(min, b); return v, "boundary-at" },
			func() (any, string) { v, _ := fill(min-1, b); return v, "boundary-past" },
		)
	}
	if len(b.Enum) > 0 {
		options = append(options,
			func() (any, string) { return g.pick(b.Enum), "enum" },
			func() (any, string) {
				e := g.pick(b.Enum)
				return g.pick([]string{strings.ToLower(e), strings.ToUpper(e), e + " ", "", "Unknown", e + "\x00"}), "non-enum"
			},
		)
	}
	if b.Pattern != nil {
		options = append(options, func() (any, string) {
			for range 10 {
				if v := g.pick(oddStrings); !b.Matches(v) {
					return v, "pattern-miss"
				}
			}
			return "Not A Pattern!", "pattern-miss"
		})
	}
	options = append(options, func() (any, string) {
		return []any{int64(1), true, nil, []any{"a"}, map[string]any{"a": "b"}}[g.rng.IntN(5)], "type"
	})
	return options[g.rng.IntN(len(options))]()
}

// hostileInt is an integer at or past its bounds, or something that is not one.
func (g *Generator) hostileInt(format string, b Bounds) (any, string) {
	type candidate struct {
		v     any
		class string
	}
	c := []candidate{{int64(0), "int"}, {int64(-1), "int"}, {int64(math.MaxInt64), "int-huge"}, {1.5, "type"}, {"1", "type"}, {nil, "type"}}
	if format == "int32" {
		c = append(c, candidate{int64(math.MaxInt32), "int-huge"}, candidate{int64(math.MaxInt32) + 1, "boundary-past"})
	}
	if b.Minimum != nil {
		c = append(c, candidate{*b.Minimum, "boundary-at"}, candidate{*b.Minimum - 1, "boundary-past"})
	}
	if b.Maximum != nil {
		c = append(c, candidate{*b.Maximum, "boundary-at"}, candidate{*b.Maximum + 1, "boundary-past"})
	}
	x := c[g.rng.IntN(len(c))]
	return x.v, x.class
}

// hostileArray is an array of valid items at or just past its length bounds, a very
// long one where it has none, an empty one, or not an array.
func (g *Generator) hostileArray(f Field, b Bounds) (any, string) {
	if f.Schema().Items == nil || f.Schema().Items.Schema == nil {
		return []any{"a", nil}, "type"
	}
	items := func(n int) []any {
		a := make([]any, n)
		for i := range a {
			a[i] = g.valid(f.child(PathStep{Kind: StepItem, Schema: f.Schema().Items.Schema}))
		}
		return a
	}
	switch g.rng.IntN(4) {
	case 0:
		if b.MaxItems != nil {
			return items(int(*b.MaxItems)), "boundary-at"
		}
		return items(2000), "unbounded"
	case 1:
		if b.MaxItems != nil {
			return items(int(*b.MaxItems) + 1), "boundary-past"
		}
		return items(500), "unbounded"
	case 2:
		if b.MinItems != nil && *b.MinItems > 0 {
			return items(int(*b.MinItems) - 1), "boundary-past"
		}
		return []any{}, "empty"
	}
	return []any{"a", map[string]any{"a": "b"}, nil}[g.rng.IntN(3)], "type"
}

// hostileMap is a map at or just past its bounds on entries, key size and value size, or
// not a map.
func (g *Generator) hostileMap(b Bounds) (any, string) {
	entries := func(n int) map[string]any {
		m := make(map[string]any, n)
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	var options []func() (any, string)
	if b.MaxProperties != nil {
		max := int(*b.MaxProperties)
		options = append(options,
			func() (any, string) { return entries(max), "boundary-at" },
			func() (any, string) { return entries(max + 1), "boundary-past" })
	} else {
		options = append(options, func() (any, string) { return entries(2000), "unbounded" })
	}
	if b.KeyMax != nil {
		max := int(*b.KeyMax)
		options = append(options,
			func() (any, string) { return map[string]any{strings.Repeat("k", max): "v"}, "boundary-at" },
			func() (any, string) { return map[string]any{strings.Repeat("k", max+1): "v"}, "boundary-past" })
	}
	if b.ValueMax != nil {
		max := int(*b.ValueMax)
		options = append(options,
			func() (any, string) { return map[string]any{"k": strings.Repeat("v", max)}, "boundary-at" },
			func() (any, string) { return map[string]any{"k": strings.Repeat("v", max+1)}, "boundary-past" },
			// CEL counts characters, not bytes: three times the bytes, admitted.
			func() (any, string) { return map[string]any{"k": strings.Repeat("€", max)}, "non-ascii-max" })
	}
	options = append(options,
		func() (any, string) { return map[string]any{}, "empty" },
		func() (any, string) { return map[string]any{"": "empty key", "\x00": "nul", "é": "é"}, "odd-string" },
		func() (any, string) { return []any{"a"}, "type" })
	return options[g.rng.IntN(len(options))]()
}

// paramValue is a hostile value of a parameter: a reference, an odd string, YAML, or a
// value at or past the bound on a parameter's size (max; nil: none known).
func (g *Generator) paramValue(max *int64) (any, string) {
	n := 65536
	if max != nil {
		n = int(*max)
	}
	switch g.rng.IntN(9) {
	case 0, 1:
		return g.pick(references), "reference"
	case 2:
		return g.pick(oddStrings), "odd-string"
	case 3, 4:
		v, _ := g.yamlDoc(n)
		return v, "yaml"
	case 5:
		return strings.Repeat("x", n), "boundary-at"
	case 6:
		return strings.Repeat("x", n+1), "boundary-past"
	case 7:
		return strings.Repeat("€", n), "non-ascii-max"
	}
	return amplify("$(params.node)", n), "amplification"
}

// amplify repeats ref to fill n characters: each reference expands to a whole param.
func amplify(ref string, n int) string {
	return strings.Repeat(ref, max(1, n/len(ref)))
}

// mutateManifest gives a k8s.apply step (an existing one, or a step made one) an odd
// manifest: the YAML parameter is parsed by the operator, the others are not.
func (g *Generator) mutateManifest(o *Object) {
	spec, _ := o.Object["spec"].(map[string]any)
	steps, _ := spec["steps"].([]any)
	if len(steps) == 0 {
		g.mutateParam(o)
		return
	}
	i := g.rng.IntN(len(steps))
	step, ok := steps[i].(map[string]any)
	if !ok {
		g.mutateParam(o)
		return
	}
	step["executor"] = "k8s.apply"
	n := 65536
	if m := g.valueMax(o.Kind, "spec.steps[].with"); m != nil {
		n = int(*m)
	}
	doc, what := g.yamlDoc(n)
	step["with"] = map[string]any{"manifest": doc}
	o.record("yaml: "+what, fmt.Sprintf("spec.steps[%d].with[\"manifest\"]", i), doc)
}

// mutateWindow gives a trigger a maintenance window of an odd schedule, time zone and
// duration at once.
func (g *Generator) mutateWindow(o *Object) {
	spec, ok := o.Object["spec"].(map[string]any)
	if o.Kind != KindTrigger || !ok {
		g.mutateField(o)
		return
	}
	schedule, duration, zone := g.inTurn(cronSchedules), g.inTurn(durations), ""
	window := map[string]any{"schedule": schedule, "duration": duration}
	if g.chance(0.8) {
		zone = g.inTurn(timeZones)
		window["timeZone"] = zone
	}
	spec["maintenanceWindow"] = window
	o.record(classCron, "spec.maintenanceWindow", fmt.Sprintf("%q in %q for %q", schedule, zone, duration))
}

// executorParams are the parameters of the executors the suite drives.
var executorParams = map[string][]string{
	"k8s.apply":   {"manifest", "manifest", "force"},
	"k8s.wait":    {"apiVersion", "kind", "name", "namespace", "condition", "jsonPath", "value", "timeout"},
	"node.drain":  {"node", "timeout", "policy", "replacement", "handoffTimeout", "podSelector", "rules", "gracePeriodSeconds", "deleteEmptyDirData"},
	"test.record": {"configMap", "gate", "fail", "output"},
}

// mutateParam sets a parameter of a step (a Pipeline's or a template's) to a value of
// the parameter's meaning for the step's executor, or a param of a trigger to an odd
// $(object.PATH).
func (g *Generator) mutateParam(o *Object) {
	spec, _ := o.Object["spec"].(map[string]any)
	steps, _ := spec["steps"].([]any)
	if o.Kind == KindTrigger || len(steps) == 0 {
		params, ok := spec["params"].(map[string]any)
		if !ok {
			g.mutateField(o)
			return
		}
		key := g.paramKey(params)
		var v any
		class := "object-reference"
		if o.Kind == KindTrigger && g.chance(0.6) {
			v = "$(object." + g.pick(fieldPaths) + ")"
		} else {
			v, class = g.paramValue(g.valueMax(o.Kind, "spec.params"))
		}
		params[key] = v
		o.record(class, fmt.Sprintf("spec.params[%q]", shorten(key, 40)), v)
		return
	}
	i := g.rng.IntN(len(steps))
	step, ok := steps[i].(map[string]any)
	if !ok {
		g.mutateField(o)
		return
	}
	executor, _ := step["executor"].(string)
	with, ok := step["with"].(map[string]any)
	if !ok {
		with = map[string]any{}
		step["with"] = with
	}
	valueMax := g.valueMax(o.Kind, "spec.steps[].with")
	var key string
	if names := executorParams[executor]; len(names) > 0 && g.chance(0.85) {
		key = g.pick(names)
	} else {
		key = g.paramKey(with)
	}
	v, class := g.executorParam(key, valueMax)
	with[key] = v
	o.record(class, fmt.Sprintf("spec.steps[%d].with[%q]", i, shorten(key, 40)), v)
}

// executorParam is a value for the parameter key, from the corpus of its meaning.
func (g *Generator) executorParam(key string, valueMax *int64) (any, string) {
	switch key {
	case "manifest":
		n := 65536
		if valueMax != nil {
			n = int(*valueMax)
		}
		v, what := g.yamlDoc(n)
		return v, "yaml: " + what
	case "timeout", "handoffTimeout":
		return g.inTurn(durations), classDuration
	case "force", "gate", "deleteEmptyDirData":
		return g.pick(boolStrings), "bool-param"
	case "gracePeriodSeconds":
		return g.pick(intStrings), "int-param"
	case "policy":
		return g.pick([]string{"Fail", "Force", "force", "", "Delete"}), "enum-param"
	case "fail":
		return g.pick([]string{"permanent", "retryable", "garbage", ""}), "enum-param"
	case "replacement":
		return g.pick([]string{"Surge", "None", "surge", "", "Rollout"}), "enum-param"
	case "podSelector":
		return g.pick(labelSelectors), "selector"
	case "rules":
		return g.pick(drainRules), "drain-rules"
	case "jsonPath":
		return g.pick(jsonPaths), "jsonpath"
	case "apiVersion":
		return g.pick(apiVersions), classAPIVersion
	case "kind":
		return g.pick(resourceKinds), classKind
	case "node", "name", "namespace", "configMap":
		return g.pick(g.objectNames()), "object-name"
	}
	return g.paramValue(valueMax)
}

// paramKey is an existing key of m or a new one, now and then an odd one.
func (g *Generator) paramKey(m map[string]any) string {
	if len(m) > 0 && g.chance(0.4) {
		return g.pick(slices.Sorted(maps.Keys(m)))
	}
	if g.chance(0.2) {
		return g.pick([]string{"", " ", "a.b", "$(params.node)", "é", "\x00", "a/b", "-", strings.Repeat("k", 64)})
	}
	g.uniq++
	return fmt.Sprintf("k%d", g.uniq)
}

// valueMax is the bound on the values of the map at path (e.g. spec.params): the smaller
// of its CEL rule's and its values' maxLength.
func (g *Generator) valueMax(kind, path string) *int64 {
	for _, f := range g.schemas[kind].Fields {
		if f.String() != path {
			continue
		}
		b := BoundsOf(f.Schema())
		if s := f.Schema().AdditionalProperties; s != nil && s.Schema != nil && s.Schema.MaxLength != nil {
			if b.ValueMax == nil || *s.Schema.MaxLength < *b.ValueMax {
				return s.Schema.MaxLength
			}
		}
		return b.ValueMax
	}
	return nil
}

// mutateReferences makes references that amplify, point forward or at themselves, or
// loop, or points a pipeline or trigger at a template, or an Approval at another wait.
func (g *Generator) mutateReferences(o *Object) {
	spec, ok := o.Object["spec"].(map[string]any)
	if !ok {
		g.mutateField(o)
		return
	}
	if o.Kind == KindApproval {
		g.retargetApproval(o, spec)
		return
	}
	steps, _ := spec["steps"].([]any)
	withOf := func(i int) map[string]any {
		step, ok := steps[i].(map[string]any)
		if !ok {
			return map[string]any{}
		}
		with, ok := step["with"].(map[string]any)
		if !ok {
			with = map[string]any{}
			step["with"] = with
		}
		return with
	}
	switch choice := g.rng.IntN(4); {
	case choice == 0 && len(steps) > 0:
		// A param as large as allowed, referred to as many times as a value allows.
		n := 65536
		if m := g.valueMax(o.Kind, "spec.steps[].with"); m != nil {
			n = int(*m)
		}
		g.setParam(o, spec, "big", strings.Repeat("b", n))
		i := g.rng.IntN(len(steps))
		withOf(i)["amplified"] = amplify("$(params.big)", n)
		o.record("amplification", fmt.Sprintf("spec.steps[%d].with[\"amplified\"]", i), "$(params.big) x"+fmt.Sprint(n/len("$(params.big)")))
	case choice == 1 && len(steps) > 0:
		// Forward, self and missing references to outputs.
		i := g.rng.IntN(len(steps))
		target := fmt.Sprintf("s%d", g.rng.IntN(len(steps)+1))
		v := "$(steps." + target + ".outputs.value)"
		withOf(i)["ref"] = v
		o.record("reference", fmt.Sprintf("spec.steps[%d].with[\"ref\"]", i), v)
	case choice == 2 && o.Kind != KindTemplate:
		// Params that refer to each other.
		params, ok := spec["params"].(map[string]any)
		if !ok {
			params = map[string]any{}
			spec["params"] = params
		}
		params["a"], params["b"] = "$(params.b)", "$(params.a)"
		o.record("reference", "spec.params", "a->b->a")
	default:
		if o.Kind == KindTemplate {
			g.mutateParam(o)
			return
		}
		ref := g.templateRef()
		spec["templateRef"] = map[string]any{"name": ref}
		if o.Kind == KindPipeline && g.chance(0.7) {
			delete(spec, "steps")
		}
		o.record(classTemplateRef, "spec.templateRef.name", ref)
	}
}

// retargetApproval points an Approval at another wait, keeping the rest: another wait's
// request for this step, or this request for another generated wait. A decision meant for
// one wait must never count for another.
func (g *Generator) retargetApproval(o *Object, spec map[string]any) {
	if len(g.waits) == 0 || g.chance(0.5) {
		v := g.someRequest()
		spec["request"] = v
		o.record(classRequest, "spec.request", v)
		return
	}
	w := g.waits[g.rng.IntN(len(g.waits))]
	spec["pipeline"], spec["step"] = w.pipeline, w.step
	o.record(classApprovalTarget, "spec.pipeline", w.pipeline+" step "+w.step)
}

// setParam sets a param of a Pipeline or trigger, or declares one with that default in a
// template.
func (g *Generator) setParam(o *Object, spec map[string]any, name, value string) {
	if o.Kind != KindTemplate {
		params, ok := spec["params"].(map[string]any)
		if !ok {
			params = map[string]any{}
			spec["params"] = params
		}
		params[name] = value
		return
	}
	params, _ := spec["params"].([]any)
	spec["params"] = append(params, map[string]any{"name": name, "default": value})
}

// mutateMetadata changes what the schema does not cover: names at their bounds, labels
// and annotations the operator reads, finalizers, owners, a foreign namespace, a status.
func (g *Generator) mutateMetadata(o *Object) {
	meta, ok := o.Object["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		o.Object["metadata"] = meta
	}
	set := func(where string, m map[string]any, key string, v any) {
		m[key] = v
		o.record("metadata", where, v)
	}
	sub := func(key string) map[string]any {
		m, ok := meta[key].(map[string]any)
		if !ok {
			m = map[string]any{}
			meta[key] = m
		}
		return m
	}
	switch g.rng.IntN(11) {
	case 0:
		// A trigger's pipelines are named after it and the object: a long trigger name
		// must still make valid pipeline names.
		set("metadata.name", meta, "name", strings.Repeat("n", 253-g.rng.IntN(2)*190))
	case 1:
		set("metadata.name", meta, "name", g.pick([]string{strings.Repeat("n", 254), "UPPER", "a..b", "-a", "é"}))
	case 2:
		delete(meta, "name")
		set("metadata.generateName", meta, "generateName", "hostile-")
	case 3:
		set("metadata.namespace", meta, "namespace", g.env.Foreign)
	case 4:
		set("metadata.labels", sub("labels"), v1alpha1.LabelTrigger, g.pick([]string{"trg-0001", "x", strings.Repeat("t", 64)}))
	case 5:
		set("metadata.annotations", sub("annotations"), v1alpha1.TeardownPolicyAnnotation, g.pick([]string{v1alpha1.TeardownOrphan, "orphan", "", "Delete", "garbage"}))
	case 6:
		set("metadata.annotations", sub("annotations"), v1alpha1.RetryAnnotation, g.pick([]string{"", "true", "s0", "no-such-step", "\x00"}))
	case 7:
		set("metadata.annotations", sub("annotations"), v1alpha1.PlanAsAnnotation, g.pick([]string{"canary-1", "", strings.Repeat("p", 253), "../x"}))
	case 8:
		// 256 KiB is the bound on all annotations together.
		set("metadata.annotations", sub("annotations"), "hostile.stepwise.dev/big", strings.Repeat("a", 256*1024-g.rng.IntN(2)*1024))
	case 9:
		if o.Kind == KindPipeline {
			// The operator's own finalizer, set by the tenant before the operator saw it.
			set("metadata.finalizers", meta, "finalizers", []any{v1alpha1.Finalizer, v1alpha1.Finalizer})
			return
		}
		fallthrough
	default:
		// An owner that does not exist: the garbage collector deletes the object.
		set("metadata.ownerReferences", meta, "ownerReferences", []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "name": g.env.ConfigMaps[0], "uid": "00000000-0000-0000-0000-000000000000",
		}})
	}
}

// mutateSize makes the object as large as the bounds of its largest map allow: about 1
// MiB (admitted), 2.5 MiB (past etcd's bound on a value) or 4 MiB (past the API server's
// bound on a request).
func (g *Generator) mutateSize(o *Object) {
	path := "spec.params"
	if o.Kind == KindTemplate {
		path = "spec.steps[].with"
	}
	var field *Field
	for _, f := range g.schemas[o.Kind].Fields {
		if f.String() == path {
			field = &f
			break
		}
	}
	if field == nil {
		g.mutateField(o)
		return
	}
	b := BoundsOf(field.Schema())
	valueMax, entriesMax := 65536, 64
	if m := g.valueMax(o.Kind, path); m != nil {
		valueMax = int(*m)
	}
	if b.MaxProperties != nil {
		entriesMax = int(*b.MaxProperties)
	}
	target := []int{1 << 20, 5 << 19, 4 << 20}[g.rng.IntN(3)]
	n := min(entriesMax, max(1, target/max(1, valueMax)))
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("big%d", i)] = strings.Repeat("s", valueMax)
	}
	where := g.put(o.Object, *field, m)
	o.record("size-max", where, fmt.Sprintf("<%d entries of %d bytes>", n, valueMax))
}

// removeField deletes a field, a required one more often than not.
func (g *Generator) removeField(o *Object) {
	fields := g.schemas[o.Kind].Fields
	var required []Field
	for _, f := range fields {
		if len(f.Path) < 2 || f.Path[len(f.Path)-1].Kind != StepProp {
			continue
		}
		if slices.Contains(f.Path[len(f.Path)-2].Schema.Required, f.Name()) {
			required = append(required, f)
		}
	}
	f := fields[g.rng.IntN(len(fields))]
	if len(required) > 0 && g.chance(0.6) {
		f = required[g.rng.IntN(len(required))]
	}
	o.record("remove", g.put(o.Object, f, removal{}), removal{})
}

// mutateStructure duplicates or reorders steps, adds what the schema prunes or forbids
// together, replaces the spec, or forges a status.
func (g *Generator) mutateStructure(o *Object) {
	spec, _ := o.Object["spec"].(map[string]any)
	steps, _ := spec["steps"].([]any)
	switch g.rng.IntN(6) {
	case 0:
		if len(steps) > 0 {
			spec["steps"] = append(steps, steps[g.rng.IntN(len(steps))])
			o.record("duplicate", "spec.steps", "a step twice")
			return
		}
		fallthrough
	case 1:
		if len(steps) > 1 {
			slices.Reverse(steps)
			o.record("structure", "spec.steps", "reversed: references point forward")
			return
		}
		fallthrough
	case 2:
		if spec != nil {
			spec["unknownField"] = map[string]any{"nested": []any{"x"}}
			o.record("unknown-field", "spec.unknownField", "pruned by the API server")
			return
		}
		fallthrough
	case 3:
		v := []any{nil, "spec", map[string]any{}, []any{}}[g.rng.IntN(4)]
		o.Object["spec"] = v
		o.record("type", "spec", v)
	case 4:
		o.Object["status"] = map[string]any{
			"phase": "Succeeded", "observedGeneration": int64(99),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Forged", "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}},
		}
		o.record("forged-status", "status", "Ready=True")
	default:
		o.Object["apiVersion"] = g.pick([]string{"stepwise.dev/v1", "stepwise.dev/v1alpha2", "v1"})
		o.record("type", "apiVersion", o.Object["apiVersion"])
	}
}

// put sets v at the field f of obj and returns the concrete path it took. Whatever is
// missing on the way is made valid; an array step goes into an existing element or
// appends one; a map step uses an existing key or a new one. A removal deletes.
func (g *Generator) put(obj map[string]any, f Field, v any) string {
	var where strings.Builder
	g.putIn(obj, f.Path, 0, v, &where)
	return where.String()
}

func (g *Generator) putIn(cur any, path []PathStep, i int, v any, where *strings.Builder) any {
	st := path[i]
	last := i == len(path)-1
	_, remove := v.(removal)
	// into goes into old, the value at this step, making it anew when it cannot hold
	// the next step.
	into := func(old any) any {
		if last {
			return v
		}
		next := path[i+1].Kind
		if _, isMap := old.(map[string]any); (next == StepItem) == isMap || old == nil {
			old = g.valid(Field{Path: path[:i+1]})
		}
		if _, isArray := old.([]any); next == StepItem && !isArray {
			old = []any{}
		}
		return g.putIn(old, path, i+1, v, where)
	}
	switch st.Kind {
	case StepItem:
		a, _ := cur.([]any)
		idx := len(a)
		if len(a) > 0 && (remove || g.rng.IntN(4) != 0) {
			idx = g.rng.IntN(len(a))
		}
		fmt.Fprintf(where, "[%d]", idx)
		if last && remove {
			if idx < len(a) {
				a = slices.Delete(a, idx, idx+1)
			}
			return a
		}
		if idx == len(a) {
			a = append(a, nil)
		}
		a[idx] = into(a[idx])
		return a
	default:
		m, ok := cur.(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		key := st.Name
		if st.Kind == StepValue {
			key = g.paramKey(m)
			fmt.Fprintf(where, "[%q]", shorten(key, 40))
		} else {
			if where.Len() > 0 {
				where.WriteByte('.')
			}
			where.WriteString(key)
		}
		if last && remove {
			delete(m, key)
			return m
		}
		m[key] = into(m[key])
		return m
	}
}
