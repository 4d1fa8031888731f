package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/transport"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/impersonate"
)

// retirerUser is who the gate's lists must act as: the trigger's ServiceAccount.
const retirerUser = "system:serviceaccount:ns:retirer"

// listRequest is one list call the configMapServer answered.
type listRequest struct {
	limit        int
	metadataOnly bool
	user         string
}

// configMapServer is an API server of n ConfigMaps labelled pool=web in namespace ns, each
// with dataBytes bytes of data, that pages as kube-apiserver does (limit, continue), serves
// PartialObjectMetadataList to a client that asks for it, and records every list call and
// how many data bytes it sent.
type configMapServer struct {
	n, dataBytes int
	// decorate, when set, changes each ConfigMap before it is served.
	decorate func(cm map[string]any)

	mu        sync.Mutex
	requests  []listRequest
	dataSent  int
	unhandled []string
}

func (s *configMapServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/ns/configmaps" || r.URL.Query().Get("labelSelector") != "pool=web" {
		s.mu.Lock()
		s.unhandled = append(s.unhandled, r.Method+" "+r.URL.String())
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	start, _ := strconv.Atoi(q.Get("continue"))
	end := s.n
	if limit > 0 {
		end = min(start+limit, s.n)
	}
	next := ""
	if end < s.n {
		next = strconv.Itoa(end)
	}
	metadataOnly := strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList")
	items := make([]any, 0, end-start)
	sent := 0
	for i := start; i < end; i++ {
		cm := s.configMap(i)
		if metadataOnly {
			cm = map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": cm["metadata"]}
		} else {
			sent += s.dataBytes
		}
		items = append(items, cm)
	}
	list := map[string]any{"apiVersion": "v1", "kind": "ConfigMapList", "metadata": map[string]any{"continue": next}, "items": items}
	if metadataOnly {
		list["apiVersion"], list["kind"] = "meta.k8s.io/v1", "PartialObjectMetadataList"
	}
	s.mu.Lock()
	s.requests = append(s.requests, listRequest{limit: limit, metadataOnly: metadataOnly, user: r.Header.Get(transport.ImpersonateUserHeader)})
	s.dataSent += sent
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// configMap is the i-th ConfigMap: its data is bytes of 'x', which no gate message may show.
func (s *configMapServer) configMap(i int) map[string]any {
	cm := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": fmt.Sprintf("cm-%04d", i), "namespace": "ns", "labels": map[string]any{"pool": "web"}},
		"data":     map[string]any{"blob": strings.Repeat("x", s.dataBytes)},
	}
	if s.decorate != nil {
		s.decorate(cm)
	}
	return cm
}

// withoutMetadataClients is the impersonating provider, without metadata-only clients.
type withoutMetadataClients struct{ *impersonate.ClientProvider }

func (p withoutMetadataClients) ForServiceAccount(namespace, name string) (*executor.Clients, error) {
	c, err := p.ClientProvider.ForServiceAccount(namespace, name)
	if err != nil {
		return nil, err
	}
	whole := *c
	whole.Metadata = nil
	return &whole, nil
}

// bigObjectsManagedFields makes a ConfigMap carry 32 KiB of managedFields and a 32 KiB
// last-applied annotation, which a gate must not hold: 130 such ConfigMaps are over
// maxGateBytes with them, far under without.
func bigObjectsManagedFields(cm map[string]any) {
	md := cm["metadata"].(map[string]any)
	md["managedFields"] = []any{map[string]any{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
		"fieldsV1": map[string]any{"f:data": map[string]any{"f:" + strings.Repeat("m", 32<<10): map[string]any{}}}}}
	md["annotations"] = map[string]any{corev1.LastAppliedConfigAnnotation: strings.Repeat("a", 32<<10), "team": "web"}
}

// TestAnObjectsGateListsInPagesWithinItsBounds: a gate lists as the trigger's
// ServiceAccount, a page at a time; it stops and fails, saying which bound was passed and
// nothing of the objects, as soon as they are too many or hold too many bytes; it holds
// neither managedFields nor the last-applied annotation; and a condition that reads only
// metadata has only metadata sent.
func TestAnObjectsGateListsInPagesWithinItsBounds(t *testing.T) {
	tests := []struct {
		name      string
		server    *configMapServer
		condition string
		// metadataClients: the provider offers metadata-only clients.
		metadataClients bool

		wantHolds        bool
		wantMessage      string
		wantLimits       []int // when set, the limits asked for, in order
		wantMetadataOnly bool
		// maxDataSent bounds the data bytes sent to the operator.
		maxDataSent int
	}{
		{name: "few small objects are listed in pages and the gate holds",
			server:    &configMapServer{n: 250, dataBytes: 1 << 10},
			condition: `objects.size() == 250 && objects.all(c, c.data.blob.size() > 0)`,
			wantHolds: true, wantLimits: []int{10, 100, 100, 100}, maxDataSent: 250 << 10},
		{name: "listing stops once the objects hold more than the byte budget",
			server:      &configMapServer{n: 300, dataBytes: 64 << 10},
			condition:   `objects.all(c, c.data.blob.size() > 0)`,
			wantMessage: "the configmaps the gate selects hold more than 8 MiB, the most a gate reads: narrow the gate's selector",
			maxDataSent: maxGateBytes + 2*(64<<10)},
		{name: "listing stops once the objects are more than the object bound",
			server:      &configMapServer{n: 1500, dataBytes: 16},
			condition:   `objects.all(c, c.data.blob.size() > 0)`,
			wantMessage: "the gate selects more than 1000 configmaps, the most a gate reads: narrow the gate's selector",
			wantLimits:  []int{10, 100, 100, 100, 100, 100, 100, 100, 100, 100, 90}, maxDataSent: 1000 * 16},
		{name: "managedFields and the last-applied annotation are neither held nor counted",
			server: &configMapServer{n: 130, dataBytes: 16, decorate: bigObjectsManagedFields},
			condition: `objects.size() == 130 && objects.all(c, c.data.blob.size() > 0 && !has(c.metadata.managedFields) &&
				!('` + corev1.LastAppliedConfigAnnotation + `' in c.metadata.annotations) && c.metadata.annotations.team == 'web')`,
			wantHolds: true, wantLimits: []int{10, 100, 100}, maxDataSent: 130 * 16},
		{name: "a condition that reads only metadata has no data sent",
			server:          &configMapServer{n: 40, dataBytes: 1 << 20},
			condition:       `objects.size() == 40 && objects.filter(c, c.metadata.labels.pool == 'web').size() == 40`,
			metadataClients: true,
			wantHolds:       true, wantLimits: []int{10, 100}, wantMetadataOnly: true, maxDataSent: 0},
		{name: "a condition that reads data lists whole objects, though metadata could be listed alone",
			server:          &configMapServer{n: 10, dataBytes: 1 << 10},
			condition:       `objects.all(c, c.data.blob.size() > 0)`,
			metadataClients: true,
			wantHolds:       true, wantLimits: []int{10}, maxDataSent: 10 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.server
			api := httptest.NewServer(srv)
			t.Cleanup(api.Close)
			gate := v1alpha1.HealthGate{Name: "web", Objects: &v1alpha1.ObjectsGate{
				Resource:  v1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"},
				Selector:  &v1alpha1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}},
				Condition: tt.condition,
			}}
			f, _, _ := gateFixture(t, gate, 0)
			base := &rest.Config{Host: api.URL}
			provider := impersonate.NewClientProvider(base, testMapper())
			f.c.clients = provider
			if !tt.metadataClients {
				f.c.clients = withoutMetadataClients{provider}
			}

			f.sync("retire")

			got := f.trigger("retire")
			require.Len(t, got.Status.Gates, 1)
			status := got.Status.Gates[0]
			assert.Equal(t, tt.wantHolds, status.Holds, status.Message)
			if tt.wantHolds {
				assert.Len(t, f.pipelineList(), 1)
			} else {
				assert.Empty(t, f.pipelineList())
				assert.Equal(t, tt.wantMessage, status.Message)
			}
			assert.NotContains(t, status.Message, "xxxx", "no bytes of the objects")

			srv.mu.Lock()
			defer srv.mu.Unlock()
			assert.Empty(t, srv.unhandled)
			require.NotEmpty(t, srv.requests)
			var limits []int
			for _, r := range srv.requests {
				assert.Equal(t, retirerUser, r.user, "listed as the trigger's ServiceAccount")
				assert.Equal(t, tt.wantMetadataOnly, r.metadataOnly)
				assert.Positive(t, r.limit, "a page at a time")
				assert.LessOrEqual(t, r.limit, gateListPage, "a page at a time")
				limits = append(limits, r.limit)
			}
			if tt.wantLimits != nil {
				assert.Equal(t, tt.wantLimits, limits)
			}
			assert.LessOrEqual(t, srv.dataSent, tt.maxDataSent, "data sent to the operator")
		})
	}
}

func TestGatePageLimit(t *testing.T) {
	const kib = 1 << 10
	tests := []struct {
		name          string
		kept          int
		held, largest int64
		want          int64
	}{
		{name: "nothing seen: the first page", want: gateFirstPage},
		{name: "small objects: a page", kept: 100, held: 100 * kib, largest: kib, want: gateListPage},
		{name: "near the object bound: what it leaves room for", kept: maxGateObjects - 40, held: kib, largest: 16, want: 40},
		{name: "large objects: what the budget's rest holds, and one", kept: 100, held: 100 * 64 * kib, largest: 64 * kib, want: 29},
		{name: "budget spent: one", kept: 8, held: maxGateBytes, largest: 1 << 20, want: 1},
		{name: "an object over the budget: one", kept: 1, held: 10, largest: 2 * maxGateBytes, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, gatePageLimit(tt.kept, tt.held, tt.largest))
		})
	}
}

// TestListGateObjectsBoundsWhatItHolds: what listGateObjects keeps is within its bounds,
// also from a server that sends more than it was asked for, and counts what objects hold
// in memory, not their JSON bytes.
func TestListGateObjectsBoundsWhatItHolds(t *testing.T) {
	sized := func(n, bytes int) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			out[i] = map[string]any{"metadata": map[string]any{"name": fmt.Sprint(i)}, "data": map[string]any{"blob": strings.Repeat("x", bytes)}}
		}
		return out
	}
	tinyFields := map[string]any{}
	for i := range 300_000 {
		tinyFields[strconv.Itoa(i)] = ""
	}
	tests := []struct {
		name string
		// all is what the server has; it sends it all at once, whatever the limit.
		all     []map[string]any
		wantErr string
	}{
		{name: "within the bounds", all: sized(100, 80<<10)},
		{name: "too many", all: sized(maxGateObjects+1, 8), wantErr: "the gate selects more than 1000 configmaps"},
		{name: "too large", all: sized(20, 1<<20), wantErr: "the configmaps the gate selects hold more than 8 MiB"},
		{name: "many tiny fields count what they hold", all: []map[string]any{{"data": tinyFields}}, wantErr: "hold more than 8 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			pages := func(_ context.Context, opts metav1.ListOptions) ([]map[string]any, string, error) {
				calls++
				assert.Equal(t, "pool=web", opts.LabelSelector)
				return tt.all, "", nil
			}
			got, err := listGateObjects(context.Background(), pages, "pool=web", "configmaps")
			assert.Equal(t, 1, calls)
			if tt.wantErr != "" {
				var bound *gateBoundError
				require.ErrorAs(t, err, &bound)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "narrow the gate's selector")
				assert.Nil(t, got, "nothing kept")
				return
			}
			require.NoError(t, err)
			assert.Len(t, got, len(tt.all))
			var held int64
			for _, obj := range got {
				held += heldBytes(obj)
			}
			assert.LessOrEqual(t, held, int64(maxGateBytes))
		})
	}
}

// TestAGateListErrorSaysWhatWasListedAndAsWhom: a failing list call closes the gate, and
// the message names the resource and the ServiceAccount.
func TestAGateListErrorSaysWhatWasListedAndAsWhom(t *testing.T) {
	f, _, _ := gateFixture(t, webReady95(0), 0)
	// Only the gate's list fails (pool=web): the trigger's informer lists Nodes too.
	f.dynamic.PrependReactor("list", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.ListAction).GetListRestrictions().Labels.String() != "pool=web" {
			return false, nil, nil
		}
		return true, nil, errors.New("the server is on fire")
	})
	f.sync("retire")
	got := f.trigger("retire")
	require.Len(t, got.Status.Gates, 1)
	assert.Equal(t, "list nodes as ServiceAccount retirer: the server is on fire", got.Status.Gates[0].Message)
}
