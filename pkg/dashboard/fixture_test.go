package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

const (
	testToken = "test-token-0123456789abcdef"
	testPort  = 8089
	testHost  = "127.0.0.1:8089"
)

var t0 = time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)

// decoded is t0+d as a decoded answer holds it (metav1.Time decodes to local time).
func decoded(d time.Duration) metav1.Time { return metav1.Time{Time: t0.Add(d).Local()} }

// testAssets stand in for the front-end's files.
func testAssets() fstest.MapFS {
	return fstest.MapFS{
		"index.html": {Data: []byte("<!DOCTYPE html><title>Stepwise</title><script src=\"/static/app.js\"></script>")},
		"app.js":     {Data: []byte("console.log('hi');")},
		"app.css":    {Data: []byte("body{}")},
		"js/live.js": {Data: []byte("export {};")},
	}
}

// fixture is a Server over fake clientsets, its caches filled.
type fixture struct {
	client *fake.Clientset
	kube   *kubefake.Clientset
	server *Server
	// runErr receives what Run returned, once the test's context ends.
	runErr chan error
}

type fixtureOptions struct {
	namespace string
	objects   []runtime.Object // Stepwise objects
	kube      []runtime.Object
	// setup adds reactors before the informers start.
	setup func(*fake.Clientset, *kubefake.Clientset)
}

func newFixture(tb testing.TB, o fixtureOptions) *fixture {
	tb.Helper()
	f := &fixture{
		client: fake.NewClientset(o.objects...),
		kube:   kubefake.NewClientset(o.kube...),
		runErr: make(chan error, 1),
	}
	if o.setup != nil {
		o.setup(f.client, f.kube)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	s, err := New(ctx, Config{Stepwise: f.client, Kube: f.kube, Namespace: o.namespace, Token: testToken, Assets: testAssets()})
	require.NoError(tb, err)
	f.server = s
	go func() { f.runErr <- s.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-f.runErr:
			require.NoError(tb, err)
		case <-time.After(10 * time.Second):
			tb.Error("Run did not return after its context ended")
		}
	})
	select {
	case <-s.Synced():
	case <-time.After(60 * time.Second):
		tb.Fatal("the caches did not fill")
	}
	return f
}

// request is an API request as the page makes it: loopback Host, the token header.
func request(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = testHost
	req.Header.Set(TokenHeader, testToken)
	return req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey,
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: testPort}))
}

func (f *fixture) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	f.server.Handler().ServeHTTP(rec, req)
	return rec
}

func (f *fixture) get(target string) *httptest.ResponseRecorder {
	return f.serve(request(http.MethodGet, target, nil))
}

func decode[T any](tb testing.TB, rec *httptest.ResponseRecorder) T {
	tb.Helper()
	var v T
	require.NoError(tb, json.Unmarshal(rec.Body.Bytes(), &v), rec.Body.String())
	return v
}

func errorOf(tb testing.TB, rec *httptest.ResponseRecorder) string {
	tb.Helper()
	return decode[errorBody](tb, rec).Error
}

// pipeline is a three-step pipeline in the given phase, created at t0+age.
func pipeline(ns, name string, phase v1alpha1.PipelinePhase, age time.Duration, mutate ...func(*v1alpha1.Pipeline)) *v1alpha1.Pipeline {
	p := &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name),
			CreationTimestamp: metav1.Time{Time: t0.Add(age)},
		},
		Spec: v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{
			{Name: "prepare", Executor: "test.noop"}, {Name: "build", Executor: "k8s.apply"}, {Name: "publish", Executor: "test.noop"},
		}},
		Status: v1alpha1.PipelineStatus{Phase: phase, CurrentStep: "build", Progress: "1/3"},
	}
	if phase == v1alpha1.PipelineFailed {
		p.Status.Conditions = []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonStepFailed,
			Message: "step build failed: forbidden", LastTransitionTime: metav1.Time{Time: t0},
		}}
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func fromTemplate(name string) func(*v1alpha1.Pipeline) {
	return func(p *v1alpha1.Pipeline) {
		p.Spec.Steps = nil
		p.Spec.TemplateRef = &v1alpha1.TemplateRef{Name: name}
	}
}

func byTrigger(name string) func(*v1alpha1.Pipeline) {
	return func(p *v1alpha1.Pipeline) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[v1alpha1.LabelTrigger] = name
	}
}

// event is an Event about the Stepwise object kind ns/name, last seen at t0+last.
func event(kind, ns, name, uid, reason string, last time.Duration) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "." + reason},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: kind, Namespace: ns, Name: name, UID: types.UID(uid),
		},
		Type: corev1.EventTypeNormal, Reason: reason, Message: reason + " of " + name, Count: 2,
		FirstTimestamp: metav1.Time{Time: t0}, LastTimestamp: metav1.Time{Time: t0.Add(last)},
	}
}
