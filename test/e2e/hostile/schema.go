package hostile

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"
)

// The kinds of the four CRDs the suite generates.
const (
	KindPipeline = "Pipeline"
	KindTemplate = "PipelineTemplate"
	KindTrigger  = "PipelineTrigger"
	KindApproval = "Approval"
)

// Kinds are the generated kinds, in a fixed order (reports and tests iterate over them).
var Kinds = []string{KindPipeline, KindTemplate, KindTrigger, KindApproval}

// CRD is what the generator needs of one CustomResourceDefinition: where it is served and
// its schema. The schema is read from crd/ at run time, never copied here, because the
// CRDs change (bounds get tightened) while this suite does not.
type CRD struct {
	Kind     string
	Resource schema.GroupVersionResource
	Root     *apiextensionsv1.JSONSchemaProps
	// Fields are every place under spec an object can hold a value, in a fixed order.
	Fields []Field
}

// APIVersion is group/version of the kind.
func (c *CRD) APIVersion() string { return c.Resource.GroupVersion().String() }

// Schemas are the CRDs by kind.
type Schemas map[string]*CRD

// modulePath identifies the repository root while walking up from the working directory.
const modulePath = "github.com/stepwise-dev/stepwise"

// CRDDir finds the repository's crd/ directory by walking up from the working directory (a
// test's working directory is its package's) to the go.mod of the product module.
func CRDDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			slices.Contains(strings.Split(string(data), "\n"), "module "+modulePath) {
			return filepath.Join(dir, "crd"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// LoadSchemas reads the CRDs of Kinds from dir and walks their schemas.
func LoadSchemas(dir string) (Schemas, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := Schemas{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := sigsyaml.Unmarshal(data, &crd); err != nil {
			return nil, fmt.Errorf("decode %s: %w", file, err)
		}
		if crd.Kind != "CustomResourceDefinition" || !slices.Contains(Kinds, crd.Spec.Names.Kind) {
			continue
		}
		c, err := newCRD(&crd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out[c.Kind] = c
	}
	for _, kind := range Kinds {
		if out[kind] == nil {
			return nil, fmt.Errorf("no CRD of kind %s in %s", kind, dir)
		}
	}
	return out, nil
}

func newCRD(crd *apiextensionsv1.CustomResourceDefinition) (*CRD, error) {
	// The storage version is the one objects are created in.
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("version %s has no schema", v.Name)
		}
		root := v.Schema.OpenAPIV3Schema
		spec, ok := root.Properties["spec"]
		if !ok {
			return nil, fmt.Errorf("version %s has no spec", v.Name)
		}
		c := &CRD{
			Kind:     crd.Spec.Names.Kind,
			Resource: schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural},
			Root:     root,
		}
		walk(&spec, []PathStep{{Name: "spec", Kind: StepProp, Schema: &spec}}, &c.Fields)
		return c, nil
	}
	return nil, fmt.Errorf("no storage version")
}

// StepKind says how a path step goes down into a value.
type StepKind int

const (
	// StepProp goes into a property of an object.
	StepProp StepKind = iota
	// StepItem goes into an element of an array.
	StepItem
	// StepValue goes into a value of a map (additionalProperties).
	StepValue
)

// PathStep is one step of a Field's path, with the schema of the value it reaches.
type PathStep struct {
	Name   string
	Kind   StepKind
	Schema *apiextensionsv1.JSONSchemaProps
}

// Field is one place in an object's spec, by schema: spec.steps[].retry.limit.
type Field struct {
	Path []PathStep
}

// Schema is the schema of the value at the field.
func (f Field) Schema() *apiextensionsv1.JSONSchemaProps { return f.Path[len(f.Path)-1].Schema }

// Name is the last property name on the path ("" for none).
func (f Field) Name() string {
	for i := len(f.Path) - 1; i >= 0; i-- {
		if f.Path[i].Kind == StepProp {
			return f.Path[i].Name
		}
	}
	return ""
}

// Parent is the property name before Name ("" for none).
func (f Field) Parent() string {
	seen := false
	for i := len(f.Path) - 1; i >= 0; i-- {
		if f.Path[i].Kind != StepProp {
			continue
		}
		if seen {
			return f.Path[i].Name
		}
		seen = true
	}
	return ""
}

func (f Field) String() string {
	var b strings.Builder
	for i, s := range f.Path {
		switch s.Kind {
		case StepProp:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		case StepItem:
			b.WriteString("[]")
		case StepValue:
			b.WriteString("{}")
		}
	}
	return b.String()
}

// walk appends every field under s (s included, but not the spec root), properties in
// name order so that a seed picks the same field every time.
func walk(s *apiextensionsv1.JSONSchemaProps, path []PathStep, out *[]Field) {
	if len(path) > 1 {
		*out = append(*out, Field{Path: slices.Clone(path)})
	}
	// A structural schema is finite, but a bound keeps a malformed one from looping.
	if len(path) > 32 {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		child := s.Properties[name]
		walk(&child, append(path, PathStep{Name: name, Kind: StepProp, Schema: &child}), out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(s.Items.Schema, append(path, PathStep{Kind: StepItem, Schema: s.Items.Schema}), out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		v := s.AdditionalProperties.Schema
		walk(v, append(path, PathStep{Kind: StepValue, Schema: v}), out)
	}
}

// Bounds of one schema node, read from the CRD: nil when the CRD sets none.
type Bounds struct {
	MinLength, MaxLength         *int64
	MinItems, MaxItems           *int64
	MinProperties, MaxProperties *int64
	Minimum, Maximum             *int64
	// KeyMax and ValueMax are a map's bounds on its keys' and values' sizes, as its CEL
	// rule states them (self.all(k, size(k) <= N && size(self[k]) <= M)).
	KeyMax, ValueMax *int64
	Enum             []string
	Pattern          *regexp.Regexp
	// DurationMin and DurationMax are a duration's bounds as its CEL rule states them
	// (duration(self) > duration('0s') && duration(self) <= duration('168h')), inclusive.
	DurationMin, DurationMax *time.Duration
}

// BoundsOf reads the bounds of s.
func BoundsOf(s *apiextensionsv1.JSONSchemaProps) Bounds {
	b := Bounds{
		MinLength: s.MinLength, MaxLength: s.MaxLength,
		MinItems: s.MinItems, MaxItems: s.MaxItems,
		MinProperties: s.MinProperties, MaxProperties: s.MaxProperties,
	}
	if s.Minimum != nil {
		v := int64(*s.Minimum)
		if s.ExclusiveMinimum {
			v++
		}
		b.Minimum = &v
	}
	if s.Maximum != nil {
		v := int64(*s.Maximum)
		if s.ExclusiveMaximum {
			v--
		}
		b.Maximum = &v
	}
	for _, e := range s.Enum {
		var v any
		if json.Unmarshal(e.Raw, &v) == nil {
			b.Enum = append(b.Enum, fmt.Sprint(v))
		}
	}
	if s.Pattern != "" {
		// OpenAPI patterns are ECMA regexps; those of these CRDs are also RE2. One that is
		// not is simply not used to shape values.
		b.Pattern, _ = regexp.Compile(s.Pattern)
	}
	for _, rule := range s.XValidations {
		key, value := celSizeBounds(rule.Rule)
		b.KeyMax = cmpOr(b.KeyMax, key)
		b.ValueMax = cmpOr(b.ValueMax, value)
		lo, hi := celDurationBounds(rule.Rule)
		b.DurationMin = cmpOr(b.DurationMin, lo)
		b.DurationMax = cmpOr(b.DurationMax, hi)
	}
	return b
}

// celDuration finds duration(self) OP duration('D').
var celDuration = regexp.MustCompile(`duration\(\s*self\s*\)\s*(<=|<|>=|>)\s*duration\(\s*['"]([^'"]*)['"]\s*\)`)

// celDurationBounds reads the inclusive bounds a CEL rule puts on a duration.
func celDurationBounds(rule string) (lo, hi *time.Duration) {
	for _, m := range celDuration.FindAllStringSubmatch(rule, -1) {
		d, err := time.ParseDuration(m[2])
		if err != nil {
			continue
		}
		switch m[1] {
		case "<":
			d -= time.Nanosecond
			fallthrough
		case "<=":
			hi = &d
		case ">":
			d += time.Nanosecond
			fallthrough
		case ">=":
			lo = &d
		}
	}
	return lo, hi
}

func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

var (
	// celAll finds the variable of self.all(VAR, ...).
	celAll = regexp.MustCompile(`self\.all\(\s*(\w+)\s*,`)
	// celSize finds size(X) <= N.
	celSize = regexp.MustCompile(`size\(\s*([^()]+?)\s*\)\s*<=?\s*(\d+)`)
)

// celSizeBounds reads the bounds a map's CEL rule puts on its keys and on its values:
// size(k) <= N and size(self[k]) <= M within self.all(k, ...).
func celSizeBounds(rule string) (key, value *int64) {
	m := celAll.FindStringSubmatch(rule)
	if m == nil {
		return nil, nil
	}
	v := m[1]
	for _, s := range celSize.FindAllStringSubmatch(rule, -1) {
		n, err := strconv.ParseInt(s[2], 10, 64)
		if err != nil {
			continue
		}
		if !strings.Contains(s[0], "<=") {
			n-- // size(x) < N
		}
		switch strings.ReplaceAll(s[1], " ", "") {
		case v:
			key = &n
		case "self[" + v + "]":
			value = &n
		}
	}
	return key, value
}

// Matches tells whether v fits the pattern (true without one).
func (b Bounds) Matches(v string) bool { return b.Pattern == nil || b.Pattern.MatchString(v) }
