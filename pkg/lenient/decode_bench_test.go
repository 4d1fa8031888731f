package lenient

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// BenchmarkDecodeList decodes a list of finished pipelines as the informer reads it at
// start: what a restart with 100,000 pipelines costs the operator per pipeline.
func BenchmarkDecodeList(b *testing.B) {
	// The controller's memory benchmark decodes the same pipeline (one copy of the fixture).
	item, err := os.ReadFile("../controller/testdata/finished-pipeline.json")
	require.NoError(b, err)
	var compact bytes.Buffer
	require.NoError(b, json.Compact(&compact, item)) // as the API server sends it
	item = compact.Bytes()
	const n = 1000
	var body bytes.Buffer
	body.WriteString(`{"apiVersion":"stepwise.dev/v1alpha1","kind":"PipelineList","metadata":{"resourceVersion":"1"},"items":[`)
	for i := range n {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(item)
	}
	body.WriteString(`]}`)
	lw := &listWatch[v1alpha1.Pipeline, *v1alpha1.Pipeline]{cfg: Config{Resource: "pipelines", Logger: klog.Background()}, undecodable: NewUndecodable()}
	b.SetBytes(int64(body.Len()))
	b.ResetTimer()
	for range b.N {
		list, err := lw.decodeList(strings.NewReader(body.String()))
		require.NoError(b, err)
		require.Len(b, list.Items, n)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/pipeline")
}
