// Package apitest reads back what code under test did to a fake clientset (any of
// client-go's generated fakes, Stepwise's included): the API writes, reads and patches, as
// the tests of the controllers, the CLI and the dashboard assert them; and, as a
// SyncBuffer, the output goroutines of the code under test write while the test reads it.
package apitest

import (
	k8stesting "k8s.io/client-go/testing"
)

// Recorder is a fake clientset: every generated fake records the actions sent to it.
type Recorder interface {
	Actions() []k8stesting.Action
}

// isRead tells whether an action only reads.
func isRead(a k8stesting.Action) bool {
	switch a.GetVerb() {
	case "get", "list", "watch":
		return true
	}
	return false
}

// WriteActions are the actions that change something: not get, list or watch.
func WriteActions(c Recorder) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range c.Actions() {
		if !isRead(a) {
			out = append(out, a)
		}
	}
	return out
}

// Writes are the write actions as "verb resource[/subresource]".
func Writes(c Recorder) []string {
	var out []string
	for _, a := range WriteActions(c) {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

// Reads are the get and list actions as "verb resource": a controller reads from its
// caches, so its tests expect none.
func Reads(c Recorder) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

// Patches are the bodies of the patches sent, in order.
func Patches(c Recorder) []string {
	var out []string
	for _, a := range c.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}
