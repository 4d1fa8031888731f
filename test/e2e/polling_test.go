package e2e

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestAWaitingHookIsCalledOncePerInterval: http.ready, asking every second a server that
// answers 503, is called once a second. Its message changes each call ("... 3s of ..."),
// so each call writes the status, whose update comes back through the informer at once:
// that sync used to call the hook again, twice per interval (pairs of GETs milliseconds
// apart).
func TestAWaitingHookIsCalledOncePerInterval(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gets []time.Time
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		gets = append(gets, time.Now())
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer unavailable.Close()
	seen := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(gets)
	}

	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", false)
	p := recordPipeline(ns, "ready", "runner", v1alpha1.Step{Name: "ready", Executor: "http.ready",
		With: map[string]string{"url": unavailable.URL, "interval": "1s", "timeout": "10m"}})
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)

	const calls = 8
	require.Eventually(t, func() bool { return len(seen()) >= calls }, time.Minute, 50*time.Millisecond,
		"http.ready did not ask %d times; operator log %s", calls, operator.Log)
	got := seen()[:calls]
	var gaps []time.Duration
	for i := 1; i < len(got); i++ {
		gaps = append(gaps, got[i].Sub(got[i-1]).Round(time.Millisecond))
	}
	t.Logf("gaps between GETs at an interval of 1s: %v", gaps)
	// Twice per interval showed as pairs of GETs milliseconds apart.
	assert.GreaterOrEqual(t, slices.Min(gaps), 900*time.Millisecond, "asked again before the interval it asked for: %v", gaps)
}
