package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

func TestHubCoalesces(t *testing.T) {
	c := func(i int) change { return change{Kind: kindPipeline, Namespace: "ops", Name: fmt.Sprintf("p%d", i)} }
	reload := []change{{Kind: kindAll}}
	for _, tc := range []struct {
		name      string
		published []change
		want      []change
	}{
		{"nothing", nil, nil},
		{"one object many times: once", []change{c(1), c(1), c(1), c(1)}, []change{c(1)}},
		{"in arrival order", []change{c(2), c(1), c(2), c(3)}, []change{c(2), c(1), c(3)}},
		{"the same name of another kind is another object", []change{c(1), {Kind: kindTrigger, Namespace: "ops", Name: "p1"}},
			[]change{c(1), {Kind: kindTrigger, Namespace: "ops", Name: "p1"}}},
		{"100 objects: each", changes(100, c), changes(100, c)},
		{"101 objects: one reload", changes(101, c), reload},
		{"a burst of thousands: one reload", changes(5000, c), reload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(time.Hour, 100) // flushed by hand
			sub := h.subscribe()
			for _, ch := range tc.published {
				h.publish(ch)
			}
			h.flush()
			assert.Equal(t, tc.want, sub.take())
			h.flush()
			assert.Empty(t, sub.take(), "a flush sends a change once")
		})
	}
}

func changes(n int, c func(int) change) []change {
	out := make([]change, 0, n)
	for i := range n {
		out = append(out, c(i))
	}
	return out
}

func TestHubSlowStream(t *testing.T) {
	h := newHub(time.Hour, 100)
	slow := h.subscribe()
	for window := range 3 {
		for i := range 40 {
			h.publish(change{Kind: kindPipeline, Namespace: "ops", Name: fmt.Sprintf("w%d-p%d", window, i)})
		}
		h.flush()
	}
	assert.Equal(t, []change{{Kind: kindAll}}, slow.take(), "120 changes queued: one reload")
	select {
	case <-slow.wake:
	default:
		t.Error("the stream is woken")
	}
}

func TestHubWithoutStreams(t *testing.T) {
	h := newHub(time.Hour, 100)
	h.publish(change{Kind: kindPipeline, Name: "a"})
	sub := h.subscribe()
	h.flush()
	assert.Empty(t, sub.take(), "changes before anyone listened are not kept")

	h.unsubscribe(sub)
	h.publish(change{Kind: kindPipeline, Name: "b"})
	h.flush()
	assert.Empty(t, sub.take())
}

func TestHubClose(t *testing.T) {
	h := newHub(10*time.Millisecond, 100)
	sub := h.subscribe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(ctx)
	}()
	cancel()
	<-done
	select {
	case <-sub.done:
	default:
		t.Fatal("the stream is told the hub closed")
	}
	assert.Nil(t, h.subscribe(), "no stream after close")
	h.publish(change{Kind: kindPipeline, Name: "a"}) // harmless
}

// TestStreamChanges goes through a real listener: a pipeline update reaches an open
// stream as a "change" event.
func TestStreamChanges(t *testing.T) {
	var once sync.Once
	watching := make(chan struct{})
	f := newFixture(t, fixtureOptions{
		objects: []runtime.Object{pipeline("ops", "alpha", v1alpha1.PipelineRunning, 0)},
		setup: func(client *fake.Clientset, _ *kubefake.Clientset) {
			// A change made before the informer watches would be lost by the fake: wait
			// for the watch.
			client.PrependWatchReactor("pipelines", func(k8stesting.Action) (bool, watch.Interface, error) {
				once.Do(func() { close(watching) })
				return false, nil, nil
			})
		},
	})
	srv := httptest.NewServer(f.server.Handler())
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the pipeline informer never watched")
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events?token="+testToken, nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended")
			return l
		case <-ctx.Done():
			t.Fatal("no message before the deadline")
			return ""
		}
	}
	// The stream is subscribed once it says so.
	for next() != ": connected" {
	}

	p, err := f.client.StepwiseV1alpha1().Pipelines("ops").Get(ctx, "alpha", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase = v1alpha1.PipelineFailed
	_, err = f.client.StepwiseV1alpha1().Pipelines("ops").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)

	var event, data string
	for data == "" {
		l := next()
		switch {
		case strings.HasPrefix(l, "event: "):
			event = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			data = strings.TrimPrefix(l, "data: ")
		}
	}
	assert.Equal(t, "change", event)
	var got change
	require.NoError(t, json.Unmarshal([]byte(data), &got))
	assert.Equal(t, change{Kind: kindPipeline, Namespace: "ops", Name: "alpha"}, got)
	assert.JSONEq(t, `{"kind":"Pipeline","namespace":"ops","name":"alpha"}`, data)
}

func TestStreamEndsWithTheServer(t *testing.T) {
	h := newHub(time.Hour, 100)
	s := &Server{hub: h, pingEvery: time.Hour}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.streamChanges(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/events", nil).WithContext(t.Context()))
	}()
	go h.run(ctx)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end when the hub closed")
	}
}
