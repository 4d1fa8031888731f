package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
)

// ElidedValues records what the operator's cache left out of its copy of a pipeline: the
// values a tenant writes (spec.params, each step's with, the template copy's values, and
// the maps of the steps' status), when together they are more than the cache keeps. The
// engine fetches the whole pipeline before it runs anything for it; what it decides
// without doing so (is there anything to do, are these the params) it decides from here.
type ElidedValues struct {
	// SpecHash is the engine's hash of the whole spec, taken before anything was left out.
	SpecHash string
	// ParamsDigest is ParamsDigest of spec.params.
	ParamsDigest string
}

// ParamsDigest identifies a set of params: equal sets, and only they (but for a SHA-256
// collision), have the same digest. nil and an empty map are the same set.
func ParamsDigest(params map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(params)) {
		// Each string is preceded by its length, so that no two sets write the same bytes.
		for _, s := range []string{k, params[k]} {
			_, _ = h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// HasParams tells whether the pipeline's spec.params are params, whether this copy is
// whole or the operator's cache left its values out.
func (p *Pipeline) HasParams(params map[string]string) bool {
	if p.Elided != nil {
		return p.Elided.ParamsDigest == ParamsDigest(params)
	}
	return maps.Equal(p.Spec.Params, params)
}

// OperatorReadsAnnotation tells whether the operator reads the annotation key on
// Stepwise's objects. Its caches keep these and drop the others, which a tenant may make
// as large as the API server allows (256 KiB an object).
func OperatorReadsAnnotation(key string) bool {
	switch key {
	case RetryAnnotation, TeardownPolicyAnnotation, PlanAsAnnotation, AnnotationCreatedBy, AnnotationEditedBy, AnnotationObject, AnnotationResume:
		return true
	}
	return false
}

// OperatorReadsLabel tells whether the operator reads the label key on Stepwise's
// objects; its caches keep these and drop the others (see OperatorReadsAnnotation).
func OperatorReadsLabel(key string) bool {
	switch key {
	case LabelTrigger, LabelTriggerUID, LabelObjectUID, LabelNodeBudget:
		return true
	}
	return false
}
