package controller

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// referencePattern matches $(...) in a step parameter. The body is checked by resolve, so
// that a typo such as $(param.node) is reported instead of passed through.
var referencePattern = regexp.MustCompile(`\$\(([^)]*)\)`)

// resolver substitutes $(params.NAME) and $(steps.STEP.outputs.KEY) in step parameters.
type resolver struct {
	params map[string]string
	// earlier holds the steps that run before the step being resolved, with their outputs.
	earlier map[string]map[string]string
	// all holds the names of every step, to tell "later step" from "no such step".
	all map[string]bool
}

// resolveParams returns with, every reference replaced, or an error naming the first
// reference that cannot be resolved.
func (r *resolver) resolveParams(with map[string]string) (map[string]string, error) {
	if len(with) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(with))
	// Sorted, so the error names the same parameter every time.
	for _, key := range slices.Sorted(maps.Keys(with)) {
		resolved, err := r.resolve(with[key])
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", key, err)
		}
		out[key] = resolved
	}
	return out, nil
}

func (r *resolver) resolve(value string) (string, error) {
	if !strings.Contains(value, "$(") {
		return value, nil
	}
	var firstErr error
	resolved := referencePattern.ReplaceAllStringFunc(value, func(match string) string {
		body := match[2 : len(match)-1]
		v, err := r.lookup(body)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	return resolved, firstErr
}

func (r *resolver) lookup(ref string) (string, error) {
	parts := strings.Split(ref, ".")
	switch {
	case len(parts) == 2 && parts[0] == "params":
		v, ok := r.params[parts[1]]
		if !ok {
			return "", fmt.Errorf("$(%s): the pipeline has no parameter %q", ref, parts[1])
		}
		return v, nil
	case len(parts) == 4 && parts[0] == "steps" && parts[2] == "outputs":
		step, key := parts[1], parts[3]
		outputs, ok := r.earlier[step]
		if !ok {
			if r.all[step] {
				return "", fmt.Errorf("$(%s): step %q does not run before this step", ref, step)
			}
			return "", fmt.Errorf("$(%s): the pipeline has no step %q", ref, step)
		}
		v, ok := outputs[key]
		if !ok {
			return "", fmt.Errorf("$(%s): step %q has no output %q", ref, step, key)
		}
		return v, nil
	default:
		return "", fmt.Errorf("$(%s): not a reference; use $(params.NAME) or $(steps.STEP.outputs.KEY)", ref)
	}
}
