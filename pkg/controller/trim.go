package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TrimForCache is an informer transform (and what the controller does to the objects its
// writes return) that keeps of an object only what the operator reads: it drops
// metadata.managedFields, and every annotation and label the operator does not read
// (kubectl's last-applied copy among them), which a tenant may make as large as the API
// server allows; it leaves out a pipeline's values when they are large (elideValues) and
// compacts what stays (compactPipeline), the cache holding every pipeline of the cluster.
// Writes are unaffected: status updates ignore metadata, and patches name only what they
// change. Trimming a trimmed object changes nothing: the Stepwise kinds' informers run it
// twice, as they decode and as they store.
func TrimForCache(obj any) (any, error) {
	if p, ok := obj.(*v1alpha1.Pipeline); ok && p.Elided != nil {
		return obj, nil // trimmed already, and its values left out
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone or something else: leave it as it is
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		m.SetAnnotations(keptKeys(a, v1alpha1.OperatorReadsAnnotation))
	}
	_, pipeline := obj.(*v1alpha1.Pipeline)
	if l := m.GetLabels(); l != nil && (!pipeline || labelsSize(l) > maxKeptPipelineLabels) {
		m.SetLabels(keptKeys(l, v1alpha1.OperatorReadsLabel))
	}
	if p, ok := obj.(*v1alpha1.Pipeline); ok {
		elideValues(p)
		compactPipeline(p)
	}
	return obj, nil
}

// maxKeptPipelineLabels bounds the labels a pipeline's cached copy keeps whole: the
// archive records a finished pipeline's labels from that copy (history lists select on
// them) without reading the pipeline again. Larger label sets keep only what the operator
// reads, as other kinds' do, so a tenant's labels cost the cache at most this much a
// pipeline.
const maxKeptPipelineLabels = 512

// labelsSize is the bytes of l's keys and values.
func labelsSize(l map[string]string) int {
	n := 0
	for k, v := range l {
		n += len(k) + len(v)
	}
	return n
}

// keptKeys is m without the keys the operator does not read (nil when none is left); m
// itself when it has none to drop, so that a trimmed map is not copied again.
func keptKeys(m map[string]string, reads func(string) bool) map[string]string {
	drop := 0
	for k := range m {
		if !reads(k) {
			drop++
		}
	}
	switch {
	case drop == 0:
		return m
	case drop == len(m):
		return nil
	}
	kept := make(map[string]string, len(m)-drop)
	for k, v := range m {
		if reads(k) {
			kept[k] = v
		}
	}
	return kept
}
