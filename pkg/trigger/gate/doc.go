// Package gate evaluates the health gates a PipelineTrigger checks before it starts a
// pipeline: a CEL condition over objects the trigger listed (Condition), and a query
// against a Prometheus-compatible HTTP API that holds while it returns no series (Query).
//
// It is pure: no Kubernetes clients. The caller lists the objects and builds the HTTP
// client (with its egress policy) and passes them in, so that what may be read and where
// it may connect stay the caller's decision.
//
// A condition sees the listed objects as the list `objects` of JSON maps, the shape
// kubectl get -o json shows. Selecting a field an object lacks is an evaluation error,
// not false: guard a field that may be missing with has(), e.g.
//
//	objects.all(d, has(d.status) && has(d.status.conditions) &&
//	    d.status.conditions.exists(c, c.type == 'Available' && c.status == 'True'))
//
// A condition is bounded: its text in length (MaxConditionLength), its evaluation in
// cost (MaxConditionCost) and in time by the caller's context (DefaultConditionTimeout
// when it has no deadline), so that a hostile or careless expression over many objects
// fails with an error instead of holding the trigger's worker. A query is bounded by the
// context and the size of the answer it reads (MaxResponseBytes).
package gate
