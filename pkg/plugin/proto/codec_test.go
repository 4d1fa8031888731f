package proto

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

func TestOutcomeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   contract.Result
		want contract.Result
	}{
		{
			name: "a finished hook",
			in:   contract.DoneWithOutputs("done", map[string]string{"id": "i-1"}),
			want: contract.DoneWithOutputs("done", map[string]string{"id": "i-1"}),
		},
		{
			name: "a hook waiting on objects names them",
			in: contract.Wait(5*time.Second, "2 pods left").Blocked(
				contract.Blocker{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "web"},
				contract.Blocker{Kind: "Node", Name: "n1"}),
			want: contract.Result{RequeueAfter: 5 * time.Second, Message: "2 pods left", BlockedBy: []contract.Blocker{
				{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "web"}, {Kind: "Node", Name: "n1"}}},
		},
		{
			name: "what the hook created",
			in:   contract.Done("opened").WithCreated(map[string]string{"ticket": "T-1"}),
			want: contract.Result{Done: true, Message: "opened", Created: map[string]string{"ticket": "T-1"}},
		},
		{
			name: "what is not UTF-8 is made so",
			in:   contract.Wait(time.Second, "").Blocked(contract.Blocker{Kind: "K", Name: "a\xffb"}),
			want: contract.Result{RequeueAfter: time.Second, BlockedBy: []contract.Blocker{{Kind: "K", Name: contract.ValidUTF8("a\xffb")}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeOutcome(EncodeOutcome(tt.in, nil))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRequestRoundTrip(t *testing.T) {
	started := time.Unix(1700000000, 42)
	in := &contract.Request{
		Step: "ticket", Hook: contract.HookDelete, Attempt: 2, Params: map[string]string{"queue": "ops"},
		Created: map[string]string{"ticket": "T-1"}, HookStarted: started.Add(time.Minute), StepStarted: started,
		Outputs: map[string]map[string]string{"ticket": {"url": "u"}},
	}
	encoded, err := EncodeRequest("ticket.open", in)
	require.NoError(t, err)
	got, err := DecodeRequest(encoded)
	require.NoError(t, err)
	assert.Equal(t, in.Created, got.Created)
	assert.True(t, in.StepStarted.Equal(got.StepStarted))
	assert.True(t, in.HookStarted.Equal(got.HookStarted))
	assert.Equal(t, in.Outputs, got.Outputs)
}
