package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestDueCalls(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	a, b := dueKey{pipeline: "a", step: "s"}, dueKey{pipeline: "b", step: "s"}
	d := newDueCalls()

	assert.Zero(t, d.early(a, now), "an attempt it does not know is due")
	d.set(a, now.Add(10*time.Second), now)
	assert.Equal(t, 10*time.Second, d.early(a, now))
	assert.Equal(t, time.Second, d.early(a, now.Add(9*time.Second)))
	assert.Zero(t, d.early(a, now.Add(10*time.Second)), "due")
	assert.Zero(t, d.len(), "forgotten once due")

	// Entries never asked for again (a pipeline gone) go at a sweep, a minute after they
	// were due.
	d.set(a, now.Add(time.Second), now)
	d.set(b, now.Add(2*time.Minute), now.Add(30*time.Second))
	assert.Equal(t, 2, d.len())
	d.set(b, now.Add(3*time.Minute), now.Add(2*time.Minute))
	assert.Equal(t, 1, d.len(), "a's entry, overdue by more than a minute, is swept")
	assert.Equal(t, time.Minute, d.early(b, now.Add(2*time.Minute)))
}

// TestDueKeyOfAStatusReadBack: the key of a step whose status went through the API server
// (times kept to the second) is the key the sync that wrote it used.
func TestDueKeyOfAStatusReadBack(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 11, 26, 8, 0, 0, 123456789, time.UTC))
	p := newPipeline(stepsOf("ready")...)
	p.UID = "uid"
	s := v1alpha1.StepStatus{Name: "ready", Hook: v1alpha1.HookCreate, Attempts: 1, HookStartTime: &started}
	data, err := json.Marshal(s)
	require.NoError(t, err)
	var readBack v1alpha1.StepStatus
	require.NoError(t, json.Unmarshal(data, &readBack))
	assert.Equal(t, dueKeyOf(p, &s), dueKeyOf(p, &readBack))

	retried := readBack
	retried.Attempts = 2
	assert.NotEqual(t, dueKeyOf(p, &s), dueKeyOf(p, &retried), "a retry in the same second is another attempt")
}
