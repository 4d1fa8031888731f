package historyapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/apis/history"
	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	stepwisev1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Options)
		want []string
	}{
		{name: "defaults", edit: func(*Options) {}},
		{name: "any port", edit: func(o *Options) { o.BindPort = 0 }},
		{name: "certificate files", edit: func(o *Options) { o.TLSCertFile, o.TLSKeyFile = "tls.crt", "tls.key" }},
		{name: "no address", edit: func(o *Options) { o.BindAddress = nil }, want: []string{"bind address is missing"}},
		{name: "not a port", edit: func(o *Options) { o.BindPort = 70000 }, want: []string{"0 (any) to 65535, got 70000"}},
		{name: "a certificate without its key", edit: func(o *Options) { o.TLSCertFile = "tls.crt" }, want: []string{"go together"}},
		{name: "files and a directory", edit: func(o *Options) { o.TLSCertFile, o.TLSKeyFile, o.CertDir = "tls.crt", "tls.key", "/certs" },
			want: []string{"not with a certificate file"}},
		{name: "all wrong", edit: func(o *Options) { o.BindAddress, o.BindPort, o.TLSKeyFile = nil, -1, "tls.key" },
			want: []string{"bind address", "got -1", "go together"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.edit(&o)
			errs := o.Validate()
			require.Len(t, errs, len(tt.want), "%v", errs)
			for i, want := range tt.want {
				assert.ErrorContains(t, errs[i], want)
			}
		})
	}
}

// Without an API server to delegate to, and without an in-cluster config, New fails,
// naming what it was doing, and lets go of its port.
func TestNewFailsWithoutAnAPIServerToDelegateTo(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	o := Options{BindAddress: net.IPv4(127, 0, 0, 1), BindPort: port, Kubeconfig: kubeconfig}
	_, err = New(o, &memArchive{})
	require.ErrorContains(t, err, "delegate the history API's authentication to the API server")

	l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err, "New left its port bound")
	require.NoError(t, l.Close())

	o.Kubeconfig = filepath.Join(t.TempDir(), "missing")
	_, err = New(o, &memArchive{})
	require.ErrorContains(t, err, "delegate the history API's authentication")
}

// tokens authenticates the bearer tokens it knows as their users.
type tokens map[string]string

func (tk tokens) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	name, ok := tk[r.Header.Get("Authorization")]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: name, Groups: []string{user.AllAuthenticated}}}, true, nil
}

// rbac lets a user do anything with pipelinerecords in one namespace, as a Role and
// RoleBinding would, and every authenticated user reach discovery and health, as the
// system:discovery ClusterRole does. It records the resource requests it was asked.
type rbac struct {
	mu     sync.Mutex
	reader map[string]string // user: namespace
	asked  []string
}

func (g *rbac) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if !a.IsResourceRequest() {
		return authorizer.DecisionAllow, "", nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, fmt.Sprintf("%s %s %s/%s %s/%s", a.GetUser().GetName(), a.GetVerb(), a.GetAPIGroup(), a.GetResource(), a.GetNamespace(), a.GetName()))
	ns, ok := g.reader[a.GetUser().GetName()]
	if ok && ns == a.GetNamespace() && a.GetAPIGroup() == history.GroupName && a.GetResource() == resource {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC policy matched", nil
}

func (g *rbac) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.asked)
}

// startServer runs the server New makes on a free port of 127.0.0.1 until the test
// ends, and returns its URL and a client that trusts its self-signed certificate. It
// waits until /readyz answers with token (none when empty).
func startServer(t *testing.T, o Options, a Archive, token string) (string, *http.Client, *rest.Config) {
	t.Helper()
	o.BindAddress = net.IPv4(127, 0, 0, 1)
	o.BindPort = 0
	o.CertDir = t.TempDir()
	srv, err := New(o, a)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(time.Minute):
			t.Error("the server did not stop")
		}
	})

	caPEM, err := os.ReadFile(filepath.Join(o.CertDir, "apiserver.crt"))
	require.NoError(t, err, "the self-signed certificate is kept in CertDir")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	base := "https://" + srv.Addr().String()

	// Serving starts in Run: wait until the server is ready.
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, base+"/readyz", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)

	cfg := &rest.Config{Host: base, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	return base, client, cfg
}

func TestServer(t *testing.T) {
	r1 := record("a", "retire-n1", stepwisev1alpha1.ArchiveSucceeded)
	r2 := record("a", "retire-n2", stepwisev1alpha1.ArchiveFailed)
	r2.Labels = map[string]string{"app": "other"}
	r3 := record("a", "retire-n3", stepwisev1alpha1.ArchiveDeleted)
	rb := record("b", "retire-n9", stepwisev1alpha1.ArchiveSucceeded)
	mem := &memArchive{
		records: []archive.Record{r1, rb, r2, r3},
		events: map[string][]archive.Event{r1.UID: {
			{PipelineUID: r1.UID, Type: "Normal", Reason: "StepSucceeded", Message: "drain", Time: t0, Count: 1},
		}},
	}
	authz := &rbac{reader: map[string]string{"reader": "a", "b-reader": "b"}}
	base, client, cfg := startServer(t, Options{
		Authn: tokens{"Bearer reader": "reader", "Bearer b-reader": "b-reader", "Bearer outsider": "outsider"},
		Authz: authorizer.AuthorizerFunc(authz.Authorize),
	}, mem, "reader")
	const records = "/apis/history.stepwise.dev/v1alpha1/namespaces/a/pipelinerecords"

	get := func(t *testing.T, path, token, accept string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	names := func(items []historyv1alpha1.PipelineRecord) []string {
		var out []string
		for _, item := range items {
			out = append(out, item.Pipeline.Name)
		}
		return out
	}

	t.Run("list as JSON", func(t *testing.T) {
		code, body := get(t, records, "reader", "application/json")
		require.Equal(t, http.StatusOK, code, string(body))
		var list historyv1alpha1.PipelineRecordList
		require.NoError(t, json.Unmarshal(body, &list))
		assert.Equal(t, "PipelineRecordList", list.Kind)
		assert.Equal(t, "history.stepwise.dev/v1alpha1", list.APIVersion)
		assert.Equal(t, []string{"retire-n1", "retire-n2", "retire-n3"}, names(list.Items))
		assert.Equal(t, "ops", list.Items[0].Spec.ServiceAccountName)
		assert.Nil(t, list.Items[0].Events)
		assert.Contains(t, authz.requests(), "reader list history.stepwise.dev/pipelinerecords a/", "RBAC was asked about list in namespace a")
	})

	t.Run("selectors", func(t *testing.T) {
		q := url.Values{"labelSelector": {"app=other"}}.Encode()
		code, body := get(t, records+"?"+q, "reader", "")
		require.Equal(t, http.StatusOK, code, string(body))
		var list historyv1alpha1.PipelineRecordList
		require.NoError(t, json.Unmarshal(body, &list))
		assert.Equal(t, []string{"retire-n2"}, names(list.Items))

		q = url.Values{"fieldSelector": {"state=Deleted,pipeline.name=retire-n3"}}.Encode()
		code, body = get(t, records+"?"+q, "reader", "")
		require.Equal(t, http.StatusOK, code, string(body))
		require.NoError(t, json.Unmarshal(body, &list))
		assert.Equal(t, []string{"retire-n3"}, names(list.Items))

		q = url.Values{"fieldSelector": {"pipeline.uid=" + r1.UID}}.Encode()
		code, body = get(t, records+"?"+q, "reader", "")
		require.Equal(t, http.StatusOK, code, string(body))
		require.NoError(t, json.Unmarshal(body, &list))
		assert.Equal(t, []string{r1.Pipeline}, names(list.Items))

		q = url.Values{"fieldSelector": {"spec.suspend=true"}}.Encode()
		code, body = get(t, records+"?"+q, "reader", "")
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, string(body), `\"spec.suspend\" is not supported on pipelinerecords; supported: metadata.name`)
	})

	t.Run("list as Table", func(t *testing.T) {
		for _, tt := range []struct {
			query    string
			wantKind string // of each row's object, "" for none
		}{
			{query: "", wantKind: "PartialObjectMetadata"},
			{query: "?includeObject=Metadata", wantKind: "PartialObjectMetadata"},
			{query: "?includeObject=Object", wantKind: "PipelineRecord"},
			{query: "?includeObject=None"},
		} {
			code, body := get(t, records+tt.query, "reader", "application/json;as=Table;v=v1;g=meta.k8s.io")
			require.Equal(t, http.StatusOK, code, string(body))
			var table metav1.Table
			require.NoError(t, json.Unmarshal(body, &table))
			assert.Equal(t, "Table", table.Kind)
			var cols []string
			for _, c := range table.ColumnDefinitions {
				cols = append(cols, c.Name)
			}
			assert.Equal(t, []string{"Name", "Pipeline", "State", "Phase", "Trigger", "Object", "Finished"}, cols)
			require.Len(t, table.Rows, 3)
			assert.Equal(t, []any{"retire-n2.3f2a9c01.1.failed", "retire-n2", "Failed", "Failed", "retire", "n1"}, table.Rows[1].Cells[:6])
			for _, row := range table.Rows {
				if tt.wantKind == "" {
					assert.Nil(t, row.Object.Raw, tt.query)
					continue
				}
				var obj metav1.PartialObjectMetadata
				require.NoError(t, json.Unmarshal(row.Object.Raw, &obj), tt.query)
				assert.Equal(t, tt.wantKind, obj.Kind, tt.query)
				assert.Equal(t, row.Cells[0], obj.Name, tt.query)
			}
		}
	})

	t.Run("pages", func(t *testing.T) {
		code, body := get(t, records+"?limit=2", "reader", "")
		require.Equal(t, http.StatusOK, code, string(body))
		var page historyv1alpha1.PipelineRecordList
		require.NoError(t, json.Unmarshal(body, &page))
		assert.Equal(t, []string{"retire-n1", "retire-n2"}, names(page.Items))
		require.NotEmpty(t, page.Continue)

		code, body = get(t, records+"?limit=2&continue="+url.QueryEscape(page.Continue), "reader", "")
		require.Equal(t, http.StatusOK, code, string(body))
		page = historyv1alpha1.PipelineRecordList{}
		require.NoError(t, json.Unmarshal(body, &page))
		assert.Equal(t, []string{"retire-n3"}, names(page.Items))
		assert.Empty(t, page.Continue)

		code, body = get(t, records+"?limit=2&continue=garbage", "reader", "")
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, string(body), "invalid continue token")
	})

	t.Run("the generated clientset pages through", func(t *testing.T) {
		cs, err := versioned.NewForConfig(cfg)
		require.NoError(t, err)
		var got []string
		opts := metav1.ListOptions{Limit: 1}
		for {
			page, err := cs.HistoryV1alpha1().PipelineRecords("a").List(context.Background(), opts)
			require.NoError(t, err)
			got = append(got, names(page.Items)...)
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
		assert.Equal(t, []string{"retire-n1", "retire-n2", "retire-n3"}, got)

		rec, err := cs.HistoryV1alpha1().PipelineRecords("a").Get(context.Background(), r1.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, r1.UID, rec.Pipeline.UID)
		require.Len(t, rec.Events, 1, "a get shows the Events")
		assert.Equal(t, "StepSucceeded", rec.Events[0].Reason)
	})

	t.Run("get", func(t *testing.T) {
		code, body := get(t, records+"/"+r1.Name, "reader", "")
		require.Equal(t, http.StatusOK, code, string(body))
		var rec historyv1alpha1.PipelineRecord
		require.NoError(t, json.Unmarshal(body, &rec))
		assert.Equal(t, "PipelineRecord", rec.Kind)
		assert.Equal(t, r1.Name, rec.Name)
		assert.Len(t, rec.Events, 1)

		code, body = get(t, records+"/"+r1.Name, "reader", "application/json;as=Table;v=v1;g=meta.k8s.io")
		require.Equal(t, http.StatusOK, code, string(body))
		var table metav1.Table
		require.NoError(t, json.Unmarshal(body, &table))
		require.Len(t, table.Rows, 1)
		assert.Equal(t, r1.Name, table.Rows[0].Cells[0])

		code, body = get(t, records+"/nope", "reader", "")
		assert.Equal(t, http.StatusNotFound, code)
		assert.Contains(t, string(body), `pipelinerecords.history.stepwise.dev \"nope\" not found`)
	})

	t.Run("RBAC decides", func(t *testing.T) {
		for _, tt := range []struct {
			path, token string
			want        int
		}{
			{path: records, token: "outsider", want: http.StatusForbidden},
			{path: records + "/" + r1.Name, token: "outsider", want: http.StatusForbidden},
			{path: records, token: "b-reader", want: http.StatusForbidden},
			{path: "/apis/history.stepwise.dev/v1alpha1/namespaces/b/pipelinerecords", token: "b-reader", want: http.StatusOK},
			{path: "/apis/history.stepwise.dev/v1alpha1/namespaces/b/pipelinerecords", token: "reader", want: http.StatusForbidden},
			{path: "/apis/history.stepwise.dev/v1alpha1/pipelinerecords", token: "reader", want: http.StatusForbidden},
			{path: records, token: "", want: http.StatusUnauthorized},
			{path: records, token: "forged", want: http.StatusUnauthorized},
		} {
			code, body := get(t, tt.path, tt.token, "")
			assert.Equal(t, tt.want, code, "%s as %q: %s", tt.path, tt.token, body)
			if tt.want == http.StatusForbidden {
				assert.Contains(t, string(body), `resource \"pipelinerecords\" in API group \"history.stepwise.dev\"`, "%s as %q", tt.path, tt.token)
			}
		}
	})

	// RBAC would allow them: the server itself refuses.
	t.Run("no watch, no writes", func(t *testing.T) {
		code, _ := get(t, records+"?watch=true", "reader", "")
		assert.Equal(t, http.StatusMethodNotAllowed, code)
		req, err := http.NewRequest(http.MethodDelete, base+records+"/"+r1.Name, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer reader")
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	})

	t.Run("discovery", func(t *testing.T) {
		code, body := get(t, "/apis/history.stepwise.dev/v1alpha1", "outsider", "application/json")
		require.Equal(t, http.StatusOK, code, string(body))
		var resources metav1.APIResourceList
		require.NoError(t, json.Unmarshal(body, &resources))
		assert.Equal(t, "history.stepwise.dev/v1alpha1", resources.GroupVersion)
		require.Len(t, resources.APIResources, 1)
		got := resources.APIResources[0]
		assert.Equal(t, "pipelinerecords", got.Name)
		assert.Equal(t, "pipelinerecord", got.SingularName)
		assert.Equal(t, "PipelineRecord", got.Kind)
		assert.True(t, got.Namespaced)
		assert.ElementsMatch(t, []string{"get", "list"}, []string(got.Verbs))

		code, body = get(t, "/apis/history.stepwise.dev", "outsider", "application/json")
		require.Equal(t, http.StatusOK, code, string(body))
		var group metav1.APIGroup
		require.NoError(t, json.Unmarshal(body, &group))
		assert.Equal(t, "history.stepwise.dev/v1alpha1", group.PreferredVersion.GroupVersion)
	})

	t.Run("archive down", func(t *testing.T) {
		mem.mu.Lock()
		mem.err = errors.New("connection refused")
		mem.mu.Unlock()
		defer func() {
			mem.mu.Lock()
			mem.err = nil
			mem.mu.Unlock()
		}()
		code, body := get(t, records, "reader", "")
		assert.Equal(t, http.StatusInternalServerError, code)
		assert.Contains(t, string(body), "connection refused")
	})
}
