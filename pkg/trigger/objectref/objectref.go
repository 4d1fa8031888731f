// Package objectref parses and binds the $(object.PATH) references of a PipelineTrigger's
// params, and the field paths of its matchFields. It is pure (no clients, no informers), so
// that kubectl-stepwise binds a trigger's params exactly as the trigger does without linking
// the trigger controller.
package objectref

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// refPrefix starts a reference to the matched object in a trigger's params.
const refPrefix = "$(object."

// A trigger's params may refer to the object a pipeline is for, as $(object.PATH). PATH is
// a small subset of JSONPath, enough to name one scalar field:
//
//   - dotted field names: metadata.name, spec.providerID, status.x.y; a field name is
//     letters, digits, '_' and '-';
//   - bracketed keys, for map keys that are not field names (labels, annotations):
//     metadata.labels['stepwise.dev/pool'] or metadata.labels["stepwise.dev/pool"]; the
//     key is anything up to the closing quote of the same kind, with no escapes (a key
//     holding a single quote is written in double quotes, and the other way round).
//
// The path starts with a field name. There are no list indexes, wildcards, filters or
// slices: a reference names one field, whose value must be a string, a number or a bool.
// The value replaces the reference; a value may hold text around references and several
// of them ("$(object.metadata.name)-$(object.spec.providerID)"). Other $(...) text, such as
// $(params.x), is left as it is, for the engine.
//
// A reference that does not parse makes the whole trigger invalid (InvalidParameters); a
// reference to a field an object lacks, or to a field of another type, is that object's
// error: it waits, without a pipeline, until it has the field.

// objectRef is one $(object.PATH) reference.
type objectRef struct {
	// text is the reference as written, for messages.
	text string
	path []string
}

// pathText is the PATH of the reference as written.
func (r *objectRef) pathText() string {
	return strings.TrimSuffix(strings.TrimPrefix(r.text, refPrefix), ")")
}

// paramPart is a piece of a param value: literal text, or a reference.
type paramPart struct {
	literal string
	ref     *objectRef
}

// paramValue is a param value, parsed.
type paramValue struct{ parts []paramPart }

// Params are a trigger's params, parsed: what Bind turns into a pipeline's params.
type Params map[string]paramValue

// Parse parses every value of a trigger's params; the error names the parameter.
func Parse(params map[string]string) (Params, error) {
	out := make(Params, len(params))
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v, err := parseParamValue(params[name])
		if err != nil {
			return nil, fmt.Errorf("params.%s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// parseParamValue splits a value into literal text and references.
func parseParamValue(value string) (paramValue, error) {
	var out paramValue
	rest := value
	for {
		i := strings.Index(rest, refPrefix)
		if i < 0 {
			break
		}
		if i > 0 {
			out.parts = append(out.parts, paramPart{literal: rest[:i]})
		}
		body := rest[i+len(refPrefix):]
		path, n, err := scanPath(body)
		if err == nil {
			switch {
			case n == len(body):
				err = fmt.Errorf(") expected at %d", n)
			case body[n] != ')':
				err = unexpected(body, n)
			}
		}
		if err != nil {
			text := body
			if end := strings.IndexByte(body, ')'); end >= 0 {
				text = body[:end+1]
			}
			return paramValue{}, fmt.Errorf("%s%s: %w", refPrefix, text, err)
		}
		out.parts = append(out.parts, paramPart{ref: &objectRef{text: refPrefix + body[:n+1], path: path}})
		rest = body[n+1:]
	}
	if rest != "" {
		out.parts = append(out.parts, paramPart{literal: rest})
	}
	return out, nil
}

// ParsePath parses a whole PATH, as matchFields names a field.
func ParsePath(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("empty path")
	}
	path, n, err := scanPath(s)
	if err != nil {
		return nil, err
	}
	if n != len(s) {
		return nil, unexpected(s, n)
	}
	return path, nil
}

// scanPath reads a PATH from the start of s and returns its fields and where it ended: at
// the end of s or at the first character that cannot continue it. Offsets in errors count
// bytes from the start of s.
func scanPath(s string) ([]string, int, error) {
	var path []string
	i := 0
	field := func() error {
		start := i
		for i < len(s) && isFieldChar(s[i]) {
			i++
		}
		if i == start {
			return fmt.Errorf("field name expected at %d", start)
		}
		path = append(path, s[start:i])
		return nil
	}
	if err := field(); err != nil {
		return nil, 0, err
	}
	for i < len(s) {
		switch s[i] {
		case '.':
			i++
			if err := field(); err != nil {
				return nil, 0, err
			}
		case '[':
			i++
			if i >= len(s) || (s[i] != '\'' && s[i] != '"') {
				return nil, 0, fmt.Errorf("quote expected at %d", i)
			}
			quote := s[i]
			i++
			end := strings.IndexByte(s[i:], quote)
			if end < 0 {
				return nil, 0, fmt.Errorf("unterminated key at %d", i-1)
			}
			if end == 0 {
				return nil, 0, fmt.Errorf("empty key at %d", i-1)
			}
			path = append(path, s[i:i+end])
			i += end + 1
			if i >= len(s) || s[i] != ']' {
				return nil, 0, fmt.Errorf("] expected at %d", i)
			}
			i++
		default:
			return path, i, nil
		}
	}
	return path, i, nil
}

func isFieldChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func unexpected(s string, i int) error {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return fmt.Errorf("unexpected %q at %d", string(r), i)
}

// Paths are the fields the params refer to: what an object must keep for them to bind.
func (b Params) Paths() [][]string {
	var out [][]string
	for _, v := range b {
		for _, part := range v.parts {
			if part.ref != nil {
				out = append(out, part.ref.path)
			}
		}
	}
	return out
}

// Bind resolves the params against obj. The error names the first parameter, in name
// order, that cannot be resolved, and the reference.
func (b Params) Bind(obj *unstructured.Unstructured) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(b))
	for _, name := range slices.Sorted(maps.Keys(b)) {
		var sb strings.Builder
		for _, part := range b[name].parts {
			if part.ref == nil {
				sb.WriteString(part.literal)
				continue
			}
			v, err := part.ref.resolve(obj)
			if err != nil {
				return nil, fmt.Errorf("params.%s: %s: %w", name, part.ref.text, err)
			}
			sb.WriteString(v)
			if sb.Len() > 4*v1alpha1.MaxParamValueLength {
				break // over the bound whatever the characters; stop copying
			}
		}
		v := sb.String()
		if utf8.RuneCountInString(v) > v1alpha1.MaxParamValueLength {
			return nil, fmt.Errorf("params.%s: resolves to more than %d characters, the bound for a parameter", name, v1alpha1.MaxParamValueLength)
		}
		out[name] = v
	}
	return out, nil
}

// resolve reads the field the reference names: a string, a number or a bool.
func (r *objectRef) resolve(obj *unstructured.Unstructured) (string, error) {
	v, found := Lookup(obj, r.path)
	if !found {
		return "", fmt.Errorf("the object has no field %s", r.pathText())
	}
	text, kind := ScalarText(v)
	if kind != "" {
		return "", fmt.Errorf("%s is %s, not a string, number or bool", r.pathText(), kind)
	}
	return text, nil
}

// Lookup finds the field at path in obj.
func Lookup(obj *unstructured.Unstructured, path []string) (any, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	// NestedFieldNoCopy fails when the path goes through something that is not an object:
	// that field does not exist either.
	return v, found && err == nil
}

// ScalarText is a field's value as text when it is a string, a number or a bool; else
// kind says what it is ("null", "an object", ...).
func ScalarText(v any) (text, kind string) {
	switch v := v.(type) {
	case string:
		return v, ""
	case bool:
		return strconv.FormatBool(v), ""
	case int64:
		return strconv.FormatInt(v, 10), ""
	case int:
		return strconv.Itoa(v), ""
	case int32:
		return strconv.FormatInt(int64(v), 10), ""
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), ""
	case nil:
		return "", "null"
	case map[string]any:
		return "", "an object"
	case []any:
		return "", "a list"
	default:
		return "", fmt.Sprintf("a %T", v)
	}
}
