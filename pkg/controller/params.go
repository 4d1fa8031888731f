package controller

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// referencePattern matches $(...) in a step parameter. The body is checked by resolve, so
// that a typo such as $(param.node) is reported instead of passed through.
var referencePattern = regexp.MustCompile(`\$\(([^)]*)\)`)

// reasonInvalidReference is the reason of a step whose parameters refer to something
// that does not exist or is not a reference.
const reasonInvalidReference = "InvalidReference"

// resolver substitutes $(params.NAME) and $(steps.STEP.outputs.KEY) in step parameters.
type resolver struct {
	params map[string]string
	// earlier holds the steps that run before the step being resolved, with their outputs.
	earlier map[string]map[string]string
	// all holds the names of every step, to tell "later step" from "no such step".
	all map[string]bool
}

// resolveParams returns with, every reference replaced, or a permanent error naming the
// first parameter that cannot be resolved (InvalidReference) or whose references expand
// past v1alpha1.MaxResolvedParamsSize for the step (InvalidParameter). The bound is
// checked before each piece is copied, so a hostile spec costs no more than the bound.
func (r *resolver) resolveParams(with map[string]string, types map[string]contract.ParamType) (map[string]string, error) {
	if len(with) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(with))
	room := v1alpha1.MaxResolvedParamsSize
	// Sorted, so the error names the same parameter every time.
	for _, key := range slices.Sorted(maps.Keys(with)) {
		resolve := r.resolve
		if types[key] == contract.ParamYAML {
			resolve = r.resolveYAML
		}
		resolved, err := resolve(with[key], room)
		if err != nil {
			return nil, contract.Permanent(reasonOf(err), fmt.Errorf("parameter %q: %w", key, err))
		}
		room -= len(key) + len(resolved)
		out[key] = resolved
	}
	return out, nil
}

// errTooLarge is resolve's error when the result would not fit its room.
var errTooLarge = fmt.Errorf("its references expand to more than %d bytes, the bound for a step's parameters", v1alpha1.MaxResolvedParamsSize)

func reasonOf(err error) string {
	if errors.Is(err, errTooLarge) {
		return contract.ReasonInvalidParameter
	}
	return reasonInvalidReference
}

// resolve substitutes the references of value, failing with errTooLarge as soon as the
// result would be longer than room bytes.
func (r *resolver) resolve(value string, room int) (string, error) {
	if !strings.Contains(value, "$(") {
		if len(value) > room {
			return "", errTooLarge
		}
		return value, nil
	}
	var b strings.Builder
	last := 0
	appendPiece := func(piece string) error {
		if b.Len()+len(piece) > room {
			return errTooLarge
		}
		b.WriteString(piece)
		return nil
	}
	for _, m := range referencePattern.FindAllStringSubmatchIndex(value, -1) {
		v, err := r.lookup(value[m[2]:m[3]])
		if err != nil {
			return "", err
		}
		if err := appendPiece(value[last:m[0]]); err != nil {
			return "", err
		}
		if err := appendPiece(v); err != nil {
			return "", err
		}
		last = m[1]
	}
	if err := appendPiece(value[last:]); err != nil {
		return "", err
	}
	return b.String(), nil
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
