package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// largestPipelineJSON is a pipeline as large as the API server stores (about 1.3 MiB of
// JSON), made of what a tenant may write: annotations and labels up to the API server's
// bounds, 16 params of 64 KiB, and a step's with of as much again.
func largestPipelineJSON(t testing.TB) []byte {
	t.Helper()
	annotations := map[string]string{v1alpha1.RetryAnnotation: ""}
	for i := range 60 {
		annotations[fmt.Sprintf("tenant.example/a%d", i)] = strings.Repeat("a", 4000)
	}
	labels := map[string]string{}
	for i := range 1000 {
		labels[fmt.Sprintf("tenant.example/l%04d", i)] = strings.Repeat("l", 63)
	}
	params, with := map[string]string{}, map[string]string{}
	for i := range 8 {
		params[fmt.Sprintf("p%d", i)] = strings.Repeat("p", 65536)
		with[fmt.Sprintf("w%d", i)] = strings.Repeat("w", 65536)
	}
	p := v1alpha1.Pipeline{
		TypeMeta: metav1.TypeMeta{APIVersion: "stepwise.dev/v1alpha1", Kind: "Pipeline"},
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "tenant", UID: "0574fdfc-2acf-4f60-ba6a-2e76688afe3d",
			ResourceVersion: "250", Generation: 1, Annotations: annotations, Labels: labels},
		Spec: v1alpha1.PipelineSpec{Params: params, Steps: []v1alpha1.Step{
			{Name: "a", Executor: "test.noop", With: with}, {Name: "b", Executor: "test.noop"},
		}},
	}
	data, err := json.MarshalIndent(p, "", "  ") // decodeCached renames by the indented form
	require.NoError(t, err)
	require.Greater(t, len(data), 1200<<10)
	return data
}

// TestTheCacheKeepsLittleOfTheLargestPipeline: what a tenant writes into a pipeline's
// values, annotations and labels does not stay in the operator's cache.
func TestTheCacheKeepsLittleOfTheLargestPipeline(t *testing.T) {
	data := largestPipelineJSON(t)
	cached := decodeCached(t, data, 7)

	kept, err := json.Marshal(cached)
	require.NoError(t, err)
	assert.Less(t, len(kept), 2<<10, "the cache kept %d bytes of a pipeline of %d", len(kept), len(data))
	require.NotNil(t, cached.Elided)
	assert.Equal(t, map[string]string{v1alpha1.RetryAnnotation: ""}, cached.Annotations, "annotations the operator reads stay")
	assert.Empty(t, cached.Labels)

	whole := &v1alpha1.Pipeline{}
	require.NoError(t, json.Unmarshal(data, whole))
	assert.Equal(t, specHash(&whole.Spec), cached.Elided.SpecHash)
	assert.True(t, cached.HasParams(whole.Spec.Params))
	assert.False(t, cached.HasParams(map[string]string{"p0": "other"}))

	again, err := TrimForCache(cached.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, cached, again, "trimming a trimmed pipeline changes nothing")
}

// BenchmarkCacheBytesPerLargestPipeline measures what a pipeline as large as the API server
// stores costs in the cache: the live heap after a GC, per pipeline, of 200 decoded and
// transformed copies (B/pipeline), against the bytes of JSON a tenant wrote (B/written).
func BenchmarkCacheBytesPerLargestPipeline(b *testing.B) {
	measureCacheBytes(b, largestPipelineJSON(b), 200)
}

// elidedFixture is a fixture whose cache holds what the informer's transform keeps, with a
// pipeline whose params are over the cache's budget: step a outputs a value over the
// budget too, which step b takes.
func elidedFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	big := strings.Repeat("x", maxCachedValueBytes+1)
	p := newPipeline(
		v1alpha1.Step{Name: "a", Executor: "test.record", With: map[string]string{"any": "$(params.big)"}},
		v1alpha1.Step{Name: "b", Executor: "test.record", With: map[string]string{"any": "$(steps.a.outputs.out)"}},
	)
	p.Spec.Params = map[string]string{"big": big}
	f := newFixture(t, p)
	f.trimmed = true
	f.refresh("p")
	f.exec.on("a", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Result{Done: true, Outputs: map[string]string{"out": output}}, nil
	})
	return f, big
}

// output is what step a of elidedFixture outputs.
var output = strings.Repeat("y", 4000)

func cachedCopy(t *testing.T, f *fixture) *v1alpha1.Pipeline {
	t.Helper()
	obj, exists, err := f.indexer.GetByKey("ns/p")
	require.NoError(t, err)
	require.True(t, exists)
	return obj.(*v1alpha1.Pipeline)
}

// TestAPipelineWhoseValuesTheCacheLeavesOutRunsWithThem: the engine fetches such a
// pipeline before it acts, so that its hooks get the values and its status writes keep
// them; once it is finished, a sync (a resync) fetches nothing.
func TestAPipelineWhoseValuesTheCacheLeavesOutRunsWithThem(t *testing.T) {
	f, big := elidedFixture(t)
	require.NotNil(t, cachedCopy(t, f).Elided)
	require.Empty(t, cachedCopy(t, f).Spec.Params)

	f.exec.on("a", v1alpha1.HookPostCreate, waitFor(0, "a moment")) // the run goes on in another sync
	f.sync("p")
	assert.True(t, f.exec.lastRequest().Params["any"] == big, "step a ran with the whole params")
	assert.Equal(t, []string{"get pipelines"}, apitest.Reads(f.client), "one fetch of the whole pipeline")
	require.NotNil(t, cachedCopy(t, f).Elided, "the status written made the cached copy large again")

	f.exec.on("a", v1alpha1.HookPostCreate, done)
	f.clock.Step(time.Minute)
	f.syncUntilIdle("p")
	assert.True(t, f.exec.lastRequest().Params["any"] == output, "step b took step a's output from the whole pipeline")
	whole := f.get("p")
	assert.True(t, whole.Ready(), "%+v", whole.Status.Conditions)
	assert.True(t, stepStatus(whole, "a").Outputs["out"] == output, "no status write lost the output the cache left out")

	f.client.ClearActions()
	f.sync("p")
	assert.Empty(t, f.client.Actions(), "a finished pipeline's resync fetches nothing and writes nothing")
}

// TestAPipelineWhoseValuesTheCacheLeavesOutIsTornDownWithThem: its teardown runs from its
// run record, which only the whole pipeline has.
func TestAPipelineWhoseValuesTheCacheLeavesOutIsTornDownWithThem(t *testing.T) {
	f, big := elidedFixture(t)
	f.syncUntilIdle("p")
	require.True(t, f.get("p").Ready())
	f.exec.reset()

	f.delete("p")
	f.syncUntilIdle("p")
	assert.Equal(t, []string{"b/PreDelete#1", "b/Delete#1", "b/PostDelete#1", "a/PreDelete#1", "a/Delete#1", "a/PostDelete#1"}, f.exec.Calls())
	assert.True(t, f.exec.lastRequest().Params["any"] == big, "step a was torn down with what it ran with")
}

// TestAnEditOfAPipelineWhoseValuesTheCacheLeavesOutRunsIt: a new spec is seen from the
// cached copy's hash, and runs with its new values.
func TestAnEditOfAPipelineWhoseValuesTheCacheLeavesOutRunsIt(t *testing.T) {
	f, big := elidedFixture(t)
	f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.UpdatePolicy = v1alpha1.UpdateRerun })
	f.syncUntilIdle("p")
	f.exec.reset()

	f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.Params["big"] = big + "2"; p.Generation++ })
	f.syncUntilIdle("p")
	assert.Contains(t, f.exec.Calls(), "a/Create#1")
	whole := f.get("p")
	assert.True(t, whole.Status.Steps[0].Ran.Params["any"] == big+"2", "step a ran again with the new value")
}
