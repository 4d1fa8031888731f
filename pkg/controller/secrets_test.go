package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

func credentials(namespace string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "creds"},
		Data:       map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret!")},
	}
}

// TestSecretsReachBuiltInExecutors: the engine reads the Secrets a step's *Secret
// parameters name, as the pipeline's ServiceAccount, for any executor: here a built-in
// one, which never got them when only the plugin host read them.
func TestSecretsReachBuiltInExecutors(t *testing.T) {
	p := newPipeline(v1alpha1.Step{Name: "login", Executor: "test.record", With: map[string]string{"credentialsSecret": "creds"}})
	f := newFixture(t, p)
	f.clients.kube = kubefake.NewClientset(credentials(p.Namespace))
	f.syncUntilIdle("p")

	assert.Equal(t, map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret!")}, f.exec.lastRequest().Secrets)
	req := f.exec.lastRequest()
	assert.Equal(t, map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret!")}, req.Secret("credentialsSecret"))
	assert.Equal(t, v1alpha1.StepSucceeded, stepStatus(f.get("p"), "login").Phase)
	assert.NotContains(t, f.events(), "s3cret!")
}

func TestReadSecrets(t *testing.T) {
	kube := kubefake.NewClientset(credentials("ns"))
	tests := []struct {
		name          string
		clients       *executor.Clients
		params        map[string]string
		types         map[string]contract.ParamType
		want          map[string][]byte
		wantByParam   map[string]map[string][]byte
		wantReason    string
		wantPermanent bool
	}{
		{name: "no Secret parameter reads nothing", clients: nil, params: map[string]string{"node": "n"}},
		{name: "an empty Secret parameter reads nothing", clients: nil, params: map[string]string{"tokenSecret": ""}},
		{
			name: "read as the pipeline's ServiceAccount", clients: &executor.Clients{Kube: kube},
			params:      map[string]string{"credentialsSecret": "creds"},
			want:        map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret!")},
			wantByParam: map[string]map[string][]byte{"credentialsSecret": {"username": []byte("admin"), "password": []byte("s3cret!")}},
		},
		{
			name: "a parameter declared of type secret", clients: &executor.Clients{Kube: kube},
			params: map[string]string{"login": "creds"}, types: map[string]contract.ParamType{"login": contract.ParamSecret},
			want:        map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret!")},
			wantByParam: map[string]map[string][]byte{"login": {"username": []byte("admin"), "password": []byte("s3cret!")}},
		},
		{
			name: "a missing Secret may appear later", clients: &executor.Clients{Kube: kube},
			params: map[string]string{"tokenSecret": "missing"}, wantReason: "SecretNotFound",
		},
		{
			name: "no client to read with", clients: &executor.Clients{},
			params: map[string]string{"credentialsSecret": "creds"}, wantReason: "SecretUnavailable", wantPermanent: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, byParam, err := readSecrets(context.Background(), tt.clients, "ns", tt.params, tt.types)
			if tt.wantReason != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantReason, executor.ReasonFor(err))
				assert.Equal(t, tt.wantPermanent, contract.IsPermanent(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantByParam, byParam)
		})
	}
}
