package v1alpha1

import (
	"strconv"
	"strings"
)

// maxNameLen is the longest object name Kubernetes takes (a DNS subdomain), so that a
// record can be served as an object of its own.
const maxNameLen = 253

// RecordName is the name of the record of a pipeline's state within its namespace:
// "<pipeline>.<first 8 hex digits of its UID>.<generation>.<state, lower case>", e.g.
// "retire-n1.3f2a9c01.1.succeeded". The UID's digits tell apart pipelines of one name
// that lived one after the other. A pipeline name too long for the whole to fit
// maxNameLen is cut (the UID part still tells pipelines apart).
func RecordName(pipeline, uid string, generation int64, state RecordState) string {
	short := strings.ToLower(strings.ReplaceAll(uid, "-", ""))
	if len(short) > 8 {
		short = short[:8]
	}
	suffix := "." + short + "." + strconv.FormatInt(generation, 10) + "." + strings.ToLower(string(state))
	if room := maxNameLen - len(suffix); len(pipeline) > room {
		// A DNS subdomain's labels end in an alphanumeric: no '-' or '.' before ours.
		pipeline = strings.TrimRight(pipeline[:max(room, 0)], "-.")
	}
	return pipeline + suffix
}

// Field selectors that a list of records understands, besides metadata.name and
// metadata.namespace: exact matches on the record's fields, and a time range on Finished
// (RFC 3339 values), e.g. --field-selector state=Failed,finishedAfter=2026-12-01T00:00:00Z.
const (
	FieldPipelineName   = "pipeline.name"
	FieldPipelineUID    = "pipeline.uid"
	FieldState          = "state"
	FieldPhase          = "phase"
	FieldTrigger        = "trigger"
	FieldObject         = "object"
	FieldFinishedAfter  = "finishedAfter"
	FieldFinishedBefore = "finishedBefore"
)
