package controller

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// finishedPipelineJSON is a pipeline of three test.noop steps as the API server returned it
// once it succeeded (managedFields included), from a local control plane.
func finishedPipelineJSON(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/finished-pipeline.json")
	require.NoError(t, err)
	return data
}

// decodeCached decodes a pipeline as the informer does (the lenient informer's decoder, then
// the transform), named i so that each copy has its own name, UID and resourceVersion.
func decodeCached(t testing.TB, data []byte, i int) *v1alpha1.Pipeline {
	t.Helper()
	raw := strings.NewReplacer(
		`"name": "p1"`, fmt.Sprintf(`"name": "p%d"`, i),
		`"uid": "0574fdfc-2acf-4f60-ba6a-2e76688afe3d"`, fmt.Sprintf(`"uid": "0574fdfc-2acf-4f60-ba6a-%012d"`, i),
		`"resourceVersion": "250"`, fmt.Sprintf(`"resourceVersion": "%d"`, 1000+i),
	).Replace(string(data))
	p := &v1alpha1.Pipeline{}
	require.NoError(t, kjson.UnmarshalCaseSensitivePreserveInts([]byte(raw), p))
	obj, err := TrimForCache(p)
	require.NoError(t, err)
	return obj.(*v1alpha1.Pipeline)
}

// BenchmarkCacheBytesPerFinishedPipeline measures what a finished pipeline costs in the
// informer's cache: the live heap after a GC, per pipeline, of 10,000 decoded and
// transformed copies (B/pipeline). make bench measures the operator's RSS; this is the
// part of it that the transform decides.
func BenchmarkCacheBytesPerFinishedPipeline(b *testing.B) {
	measureCacheBytes(b, finishedPipelineJSON(b), 10000)
}

// measureCacheBytes reports the live heap, per pipeline, of n copies of the pipeline data
// decoded and transformed as the informer does (B/pipeline), and the bytes of its JSON
// (B/written).
func measureCacheBytes(b *testing.B, data []byte, n int) {
	for b.Loop() {
		b.ReportMetric(float64(len(data)), "B/written")
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		kept := make([]*v1alpha1.Pipeline, n)
		for i := range kept {
			kept[i] = decodeCached(b, data, i)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		// Signed: with little kept a pipeline, a collection may leave less than there was before.
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/pipeline")
		runtime.KeepAlive(kept)
	}
}

// TestCompactingAPipelineKeepsItsValue: whatever a pipeline holds, the cache's compact copy
// is equal to it, and the strings two copies have in common are stored once.
func TestCompactingAPipelineKeepsItsValue(t *testing.T) {
	for seed := range int64(200) {
		f := randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 4)
		original := &v1alpha1.Pipeline{}
		f.Fill(original)
		compacted := original.DeepCopy()
		compactPipeline(compacted)
		require.True(t, equality.Semantic.DeepEqual(original, compacted), "seed %d: %s", seed, cmp.Diff(original, compacted))
	}

	// The canonical copy of an interned string lasts until the next garbage collection
	// (compactPipeline): none may run between the two decodes.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	data := finishedPipelineJSON(t)
	a, b := decodeCached(t, data, 1), decodeCached(t, data, 2)
	assert.Same(t, unsafe.StringData(a.Status.Steps[0].Ran.StepHash), unsafe.StringData(b.Status.Steps[2].Ran.StepHash))
	assert.Same(t, unsafe.StringData(a.Status.Conditions[0].Message), unsafe.StringData(b.Status.Conditions[0].Message))
	assert.NotSame(t, unsafe.StringData(a.Name), unsafe.StringData(b.Name))
	assert.Equal(t, len(a.Status.Steps), cap(a.Status.Steps), "no spare capacity")
}
