package lenient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/scheme"
)

// pipelineJSON is a pipeline as the API server stores it; timeout goes in verbatim, as a
// schema without bounds admits it.
func pipelineJSON(ns, name, uid, rv, timeout string) string {
	return fmt.Sprintf(`{"apiVersion":"stepwise.dev/v1alpha1","kind":"Pipeline",`+
		`"metadata":{"namespace":%q,"name":%q,"uid":%q,"resourceVersion":%q},`+
		`"spec":{"steps":[{"name":"a","executor":"test.noop","timeout":%q}]},`+
		`"status":{"phase":"Pending","steps":[{"name":"a","ran":{"executor":"test.noop","stepHash":"h","generation":1}}]}}`,
		ns, name, uid, rv, timeout)
}

// fakeAPIServer serves a list of pipelines, then a watch that sends events until the test
// ends.
type fakeAPIServer struct {
	list   []string
	events chan string
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") != "true" {
		_, _ = fmt.Fprintf(w, `{"apiVersion":"stepwise.dev/v1alpha1","kind":"PipelineList","metadata":{"resourceVersion":"10"},"items":[%s]}`,
			joinJSON(f.list))
		return
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case ev := <-f.events:
			_, _ = fmt.Fprintln(w, ev)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func joinJSON(items []string) string {
	out := ""
	for i, it := range items {
		if i > 0 {
			out += ","
		}
		out += it
	}
	return out
}

func event(typ, obj string) string {
	b, _ := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(obj)})
	return string(b)
}

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) Undecodable(resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[resource]++
}

func (c *counter) get(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[resource]
}

// TestOnePoisonObjectDoesNotStopTheInformer: a pipeline whose timeout metav1.Duration
// cannot decode (as a tenant stored it before the schema bounded it) used to fail the list
// of every pipeline ("time: invalid duration"), so the cache never synced and no
// namespace was served. Now the cache syncs, holds the others decoded and a stand-in of
// the poison (its identity and status), and says why it could not be decoded; the same
// goes for an object the watch brings, and a fixed object is decoded again.
func TestOnePoisonObjectDoesNotStopTheInformer(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, stop := context.WithCancel(ctx)
	api := &fakeAPIServer{
		list: []string{
			pipelineJSON("team-a", "poison", "uid-poison", "5", "9999999999h"),
			pipelineJSON("team-b", "fine", "uid-fine", "6", "1h"),
		},
		events: make(chan string, 10),
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer stop() // the informer's watch ends before the server closes
	cs, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	faults := &counter{n: map[string]int{}}
	informer, undecodable := NewInformer[v1alpha1.Pipeline](Config{
		Client: cs.StepwiseV1alpha1().RESTClient(), Resource: "pipelines",
		ParameterCodec: scheme.ParameterCodec, Faults: faults, Logger: logger,
	})
	go informer.Run(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.True(t, cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced), "the cache syncs despite the poison")

	get := func(key string) *v1alpha1.Pipeline {
		obj, ok, err := informer.GetIndexer().GetByKey(key)
		require.NoError(t, err)
		require.True(t, ok, key)
		return obj.(*v1alpha1.Pipeline)
	}
	fine := get("team-b/fine")
	assert.NoError(t, undecodable.Err(fine))
	assert.Equal(t, time.Hour, fine.Spec.Steps[0].Timeout.Duration)

	poison := get("team-a/poison")
	require.Error(t, undecodable.Err(poison))
	assert.Contains(t, undecodable.Err(poison).Error(), `invalid duration "9999999999h"`)
	assert.Empty(t, poison.Spec.Steps, "the stand-in has no spec")
	require.Len(t, poison.Status.Steps, 1, "the stand-in keeps the status: what ran can be torn down")
	assert.Equal(t, "test.noop", poison.Status.Steps[0].Ran.Executor)
	assert.Equal(t, 1, faults.get("pipelines"))

	// Through the watch: a second poison arrives, the first is fixed.
	api.events <- event("ADDED", pipelineJSON("team-a", "poison2", "uid-poison2", "11", "99999999999999h"))
	api.events <- event("MODIFIED", pipelineJSON("team-a", "poison", "uid-poison", "12", "10m"))
	require.Eventually(t, func() bool {
		obj, ok, _ := informer.GetIndexer().GetByKey("team-a/poison")
		return ok && obj.(*v1alpha1.Pipeline).ResourceVersion == "12"
	}, 10*time.Second, 10*time.Millisecond)
	fixed := get("team-a/poison")
	assert.NoError(t, undecodable.Err(fixed))
	assert.Equal(t, 10*time.Minute, fixed.Spec.Steps[0].Timeout.Duration)
	assert.Error(t, undecodable.Err(get("team-a/poison2")))
	assert.Equal(t, 2, faults.get("pipelines"))

	api.events <- event("DELETED", pipelineJSON("team-a", "poison2", "uid-poison2", "13", "99999999999999h"))
	require.Eventually(t, func() bool { return undecodable.Len() == 0 }, 10*time.Second, 10*time.Millisecond,
		"a deleted object's record goes with it")
}

// TestDecodeKeepsWhatDecodes: the stand-in keeps the status when it decodes, the identity
// only when not; without a name nothing can be reported on, and the object is left out.
func TestDecodeKeepsWhatDecodes(t *testing.T) {
	tests := []struct {
		name        string
		raw         string
		wantErr     bool
		wantSteps   int
		wantStatus  int
		wantDropped bool
	}{
		{name: "decodes", raw: pipelineJSON("ns", "p", "u", "1", "1h"), wantSteps: 1, wantStatus: 1},
		{name: "spec fails", raw: pipelineJSON("ns", "p", "u", "1", "9999999999h"), wantErr: true, wantStatus: 1},
		{name: "status fails too", raw: `{"metadata":{"name":"p","uid":"u"},"spec":{"steps":[{"name":"a","timeout":"x"}]},"status":{"steps":[{"attempts":99999999999}]}}`, wantErr: true},
		{name: "metadata fails", raw: `{"metadata":{"name":7}}`, wantDropped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, decodeErr, err := decode[v1alpha1.Pipeline]([]byte(tt.raw))
			if tt.wantDropped {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantErr, decodeErr != nil, "%v", decodeErr)
			assert.Equal(t, "p", obj.Name)
			assert.Len(t, obj.Spec.Steps, tt.wantSteps)
			assert.Len(t, obj.Status.Steps, tt.wantStatus)
		})
	}
}

// TestListIsDecodedAsItStreams: the list's metadata and items are read in whatever order
// the fields come, an item that is not even an object is left out, and a body cut short
// is an error (the reflector lists again), never a list with fewer items.
func TestListIsDecodedAsItStreams(t *testing.T) {
	fine := pipelineJSON("team-b", "fine", "uid-fine", "6", "1h")
	for _, tt := range []struct {
		name    string
		body    string
		wantRV  string
		wantLen int
		wantErr string
	}{
		{name: "metadata first", body: `{"kind":"PipelineList","metadata":{"resourceVersion":"10"},"items":[` + fine + `,` + fine + `]}`, wantRV: "10", wantLen: 2},
		{name: "items first", body: `{"items":[` + fine + `],"apiVersion":"stepwise.dev/v1alpha1","metadata":{"resourceVersion":"11","continue":""}}`, wantRV: "11", wantLen: 1},
		{name: "null items", body: `{"metadata":{"resourceVersion":"12"},"items":null}`, wantRV: "12"},
		{name: "an item not an object", body: `{"metadata":{"resourceVersion":"13"},"items":[42,` + fine + `]}`, wantRV: "13", wantLen: 1},
		{name: "cut short", body: `{"metadata":{"resourceVersion":"14"},"items":[` + fine + `,{"metadata":`, wantErr: "unexpected EOF"},
		{name: "not a list", body: `[1,2]`, wantErr: "want '{'"},
		{name: "stray commas", body: `{"metadata":{"resourceVersion":"15"},"items":[,` + fine + `,]}`, wantRV: "15", wantLen: 1},
		{name: "a missing comma", body: `{"metadata":{"resourceVersion":"16"},"items":[` + fine + ` ` + fine + `]}`, wantErr: "want ','"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			lw := &listWatch[v1alpha1.Pipeline, *v1alpha1.Pipeline]{cfg: Config{Resource: "pipelines", Logger: logger}, undecodable: NewUndecodable()}
			list, err := lw.decodeList(strings.NewReader(tt.body))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantRV, list.ResourceVersion)
			require.Len(t, list.Items, tt.wantLen)
			for _, item := range list.Items {
				assert.Equal(t, "fine", item.Object.(*v1alpha1.Pipeline).Name)
			}
		})
	}
}

// TestTheTransformRunsAsEachObjectIsDecoded: a list's items come out transformed, so that a
// long list is never held in memory as decoded (the stand-in of an object that does not
// decode too).
func TestTheTransformRunsAsEachObjectIsDecoded(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	withManaged := `{"apiVersion":"stepwise.dev/v1alpha1","kind":"Pipeline","metadata":{"namespace":"a","name":"m","uid":"u",` +
		`"managedFields":[{"manager":"kubectl"}]},"spec":{"steps":[{"name":"a","executor":"test.noop","timeout":"99999999999h"}]}}`
	lw := &listWatch[v1alpha1.Pipeline, *v1alpha1.Pipeline]{undecodable: NewUndecodable(), cfg: Config{
		Resource: "pipelines", Logger: logger,
		Transform: func(obj any) (any, error) {
			obj.(*v1alpha1.Pipeline).ManagedFields = nil
			obj.(*v1alpha1.Pipeline).Labels = map[string]string{"transformed": "yes"}
			return obj, nil
		},
	}}
	body := `{"metadata":{"resourceVersion":"3"},"items":[` + pipelineJSON("a", "p", "u1", "1", "1h") + `,` + withManaged + `]}`
	list, err := lw.decodeList(strings.NewReader(body))
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
	for _, item := range list.Items {
		p := item.Object.(*v1alpha1.Pipeline)
		assert.Equal(t, "yes", p.Labels["transformed"], p.Name)
		assert.Empty(t, p.ManagedFields, p.Name)
	}
	assert.Error(t, lw.undecodable.Err(list.Items[1].Object.(*v1alpha1.Pipeline)), "the stand-in is still recorded")
}

// TestAListIsDecodedInOrderAcrossBatches: items are decoded a batch at a time on every CPU;
// they come out in the list's order, less what cannot even be a stand-in, and a poison
// item's stand-in keeps its place.
func TestAListIsDecodedInOrderAcrossBatches(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	var items, want []string
	for i := range 2*listBatch + 88 {
		name := fmt.Sprintf("p%04d", i)
		switch i {
		case 300:
			items = append(items, `42`) // not an object: left out
			continue
		case 301:
			items = append(items, pipelineJSON("a", name, "uid-"+name, "5", "not-a-duration"))
		default:
			items = append(items, pipelineJSON("a", name, "uid-"+name, "5", "1h"))
		}
		want = append(want, name)
	}
	lw := &listWatch[v1alpha1.Pipeline, *v1alpha1.Pipeline]{cfg: Config{Resource: "pipelines", Logger: logger}, undecodable: NewUndecodable()}
	list, err := lw.decodeList(strings.NewReader(`{"metadata":{"resourceVersion":"9"},"items":[` + joinJSON(items) + `]}`))
	require.NoError(t, err)
	var got []string
	for _, item := range list.Items {
		got = append(got, item.Object.(*v1alpha1.Pipeline).Name)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 1, lw.undecodable.Len(), "the poison item is recorded")
}

// TestAListBatchIsBoundedInBytes: large objects are decoded a few at a time, so that the
// raw bytes read ahead stay bounded whatever the objects' size.
func TestAListBatchIsBoundedInBytes(t *testing.T) {
	tests := []struct {
		name     string
		itemSize int
		wantFull int // the item that fills the batch
	}{
		{name: "small objects: listBatch of them", itemSize: 3 << 10, wantFull: listBatch},
		{name: "objects of 1 MiB: 8 MiB of them", itemSize: 1 << 20, wantFull: 8},
		{name: "objects of 1.5 MiB", itemSize: 1536 << 10, wantFull: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b rawBatch
			raw := make([]byte, tt.itemSize)
			full := 0
			for i := 1; i <= listBatch && full == 0; i++ {
				if b.add(raw) {
					full = i
				}
			}
			assert.Equal(t, tt.wantFull, full)
			b.reset()
			assert.Empty(t, b.items)
			assert.Zero(t, b.bytes)
		})
	}
}

// TestAListOfNoneAsksForOneObjectFromTheStore: a transient stream's list wants only a
// resource version. From the watch cache (resourceVersion=0, a reflector's first list) the
// API server ignores the limit: a restart with 100,000 resting pipelines listed them all.
func TestAListOfNoneAsksForOneObjectFromTheStore(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		_, _ = io.WriteString(w, `{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"42","continue":"more"},"items":[`+
			`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"ns","uid":"uid-a","resourceVersion":"7"}}]}`)
	}))
	defer srv.Close()
	cs, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	lw := &listWatch[v1alpha1.Pipeline, *v1alpha1.Pipeline]{cfg: Config{Client: cs.StepwiseV1alpha1().RESTClient(), Resource: "pipelines",
		ParameterCodec: scheme.ParameterCodec, Logger: logger, FieldSelector: "status.resting=Failed", MetadataOnly: true, ListNone: true},
		undecodable: NewUndecodable()}
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	require.NoError(t, err)
	l := list.(*metav1.List)
	assert.Equal(t, "42", l.ResourceVersion)
	assert.Empty(t, l.Items, "no object: only the resource version")
	assert.Empty(t, l.Continue)
	q := got.URL.Query()
	assert.Equal(t, "1", q.Get("limit"))
	assert.Empty(t, q.Get("resourceVersion"), "from the store, which honours the limit")
	assert.Equal(t, "status.resting=Failed", q.Get("fieldSelector"))
	assert.Contains(t, got.Header.Get("Accept"), "as=PartialObjectMetadataList")
}
