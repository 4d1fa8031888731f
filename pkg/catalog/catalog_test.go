package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

type plain struct{ executor.Base }

func (plain) Name() string { return "plain.exec" }

type described struct {
	executor.Base
	name string
	d    contract.Description
}

func (e described) Name() string                   { return e.name }
func (e described) Describe() contract.Description { return e.d }

func registry(t *testing.T) *executor.Registry {
	t.Helper()
	reg := executor.NewRegistry()
	require.NoError(t, reg.Register(
		plain{},
		described{name: "node.cordon", d: contract.Description{
			Description: "Cordons.",
			Parameters:  []contract.Parameter{{Name: "node", Description: "The node.", Required: true}},
		}},
		described{name: "vsphere.terminate-vm", d: contract.Description{
			Version: "v1.2.0", Description: "Terminates.", Plugin: "stepwise-plugin-vsphere",
		}},
	))
	return reg
}

func TestBuild(t *testing.T) {
	got := Build(registry(t), "v0.3.0")
	assert.Equal(t, Catalog{OperatorVersion: "v0.3.0", Executors: []Entry{
		{Name: "node.cordon", Description: contract.Description{
			Version: "v0.3.0", Description: "Cordons.",
			Parameters: []contract.Parameter{{Name: "node", Description: "The node.", Required: true}},
		}},
		{Name: "plain.exec", Description: contract.Description{Version: "v0.3.0"}},
		{Name: "vsphere.terminate-vm", Description: contract.Description{
			Version: "v1.2.0", Description: "Terminates.", Plugin: "stepwise-plugin-vsphere",
		}},
	}}, got, "sorted by name; built-ins get the operator's version, plugins keep theirs")

	data, err := json.Marshal(got.Executors[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"node.cordon","version":"v0.3.0","description":"Cordons.",
		"parameters":[{"name":"node","description":"The node.","required":true}]}`, string(data),
		"the description's fields sit next to the name")
}

// writes lists the verbs of the requests that changed something.
func writes(client *fake.Clientset) []string {
	var verbs []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	return verbs
}

func TestPublish(t *testing.T) {
	v1 := Build(registry(t), "v1")
	v2 := Build(registry(t), "v2")
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: "ops", Labels: map[string]string{"team": "a"}},
		Data:       map[string]string{"note": "kept"},
	}

	tests := []struct {
		name        string
		existing    []runtime.Object
		publish     []Catalog
		wantChanged []bool
		wantWrites  []string
	}{
		{
			name:        "creates the ConfigMap when there is none",
			publish:     []Catalog{v1},
			wantChanged: []bool{true},
			wantWrites:  []string{"create"},
		},
		{
			name:        "writes nothing when the catalogue is unchanged",
			publish:     []Catalog{v1, v1},
			wantChanged: []bool{true, false},
			wantWrites:  []string{"create"},
		},
		{
			name:        "updates a changed catalogue",
			publish:     []Catalog{v1, v2},
			wantChanged: []bool{true, true},
			wantWrites:  []string{"create", "update"},
		},
		{
			name:        "adds its key to a ConfigMap that has other keys",
			existing:    []runtime.Object{foreign},
			publish:     []Catalog{v1},
			wantChanged: []bool{true},
			wantWrites:  []string{"update"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(tt.existing...)
			p := NewPublisher(client, nil, "ops", DefaultName)
			for i, c := range tt.publish {
				changed, err := p.Publish(ctx, c)
				require.NoError(t, err)
				assert.Equal(t, tt.wantChanged[i], changed, "publish #%d", i)
			}
			assert.Equal(t, tt.wantWrites, writes(client))

			got, err := Read(ctx, client, "ops", DefaultName)
			require.NoError(t, err)
			assert.Equal(t, tt.publish[len(tt.publish)-1], got, "what was published last is read back")

			cm, err := client.CoreV1().ConfigMaps("ops").Get(ctx, DefaultName, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "executor-catalog", cm.Labels["app.kubernetes.io/component"])
			for k, v := range foreignKeys(tt.existing) {
				assert.Equal(t, v, cm.Data[k], "other keys are kept")
			}
		})
	}
}

func foreignKeys(objs []runtime.Object) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		for k, v := range o.(*corev1.ConfigMap).Data {
			out[k] = v
		}
	}
	return out
}

func TestRunRetriesUntilPublished(t *testing.T) {
	client := fake.NewClientset()
	failures := 2
	client.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, errors.New("namespace not found")
		}
		return false, nil, nil
	})
	p := NewPublisher(client, nil, "ops", DefaultName)
	p.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 100}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Run(ctx, Build(registry(t), "v1"))

	require.NoError(t, ctx.Err(), "Run returned because it published, not because time ran out")
	assert.Equal(t, []string{"create", "create", "create"}, writes(client))
	_, err := Read(context.Background(), client, "ops", DefaultName)
	assert.NoError(t, err)
}

func TestRunStopsWithTheContext(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	p := NewPublisher(client, nil, "ops", DefaultName)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { p.Run(ctx, Catalog{}); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string]string
		wantErr string
	}{
		{name: "no key", data: map[string]string{}, wantErr: "has no key executors.json"},
		{name: "not JSON", data: map[string]string{DataKey: "{"}, wantErr: "decode executor catalogue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: "ops"}, Data: tt.data,
			})
			_, err := Read(context.Background(), client, "ops", DefaultName)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	_, err := Read(context.Background(), fake.NewClientset(), "ops", DefaultName)
	assert.ErrorContains(t, err, "get executor catalogue ConfigMap ops/stepwise-executors")
}

// TestRefusedPluginsArePublished: the catalogue lists each refused plugin with its typed
// reason, read back as written, and Run records one Warning Event on the ConfigMap for
// each, naming the plugin and the mismatch.
func TestRefusedPluginsArePublished(t *testing.T) {
	reg := registry(t)
	refusal := executor.Refusal{Plugin: "stepwise-plugin-acme", Reason: v1alpha1.PluginSignedOtherContent,
		Message: "its signature is refused (SignedOtherContent): the signature is over other bytes"}
	reg.Refuse(refusal)
	c := Build(reg, "v1")
	assert.Equal(t, []executor.Refusal{refusal}, c.RefusedPlugins)

	client := fake.NewClientset()
	recorder := record.NewFakeRecorder(10)
	p := NewPublisher(client, recorder, "ops", DefaultName)
	p.Run(context.Background(), c)
	got, err := Read(context.Background(), client, "ops", DefaultName)
	require.NoError(t, err)
	assert.Equal(t, c.RefusedPlugins, got.RefusedPlugins)
	require.Len(t, recorder.Events, 1)
	assert.Equal(t, "Warning PluginRefused plugin stepwise-plugin-acme refused (SignedOtherContent): "+refusal.Message, <-recorder.Events)

	assert.Empty(t, Build(registry(t), "v1").RefusedPlugins, "none refused: none listed")
}
