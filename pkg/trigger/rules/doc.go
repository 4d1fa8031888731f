// Package rules holds what a PipelineTrigger decides, as pure functions of the API's
// objects: which objects it matches, in which order they start, how many may start, the
// pipeline it makes for an object and which pipelines are its own. The trigger
// (pkg/trigger), kubectl stepwise plan --trigger and the dashboard all call it, so that
// what a client shows is what the trigger does.
//
// It imports the API types, apimachinery and package objectref only: no clients,
// informers or metrics, so that a client links none of the controller.
package rules
