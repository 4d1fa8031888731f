package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

type decodeErrs map[string]error

func (d decodeErrs) Err(obj metav1.Object) error { return d[obj.GetName()] }

type recordingPatcher struct{ bodies []map[string]any }

func (r *recordingPatcher) Patch(_ context.Context, _, _ string, patch []byte, sub ...string) error {
	if len(sub) != 1 || sub[0] != "status" {
		return errors.New("only status patches are expected")
	}
	var body map[string]any
	if err := json.Unmarshal(patch, &body); err != nil {
		return err
	}
	r.bodies = append(r.bodies, body)
	return nil
}

// TestUndecodableTriggerStartsNothing: a trigger the informer could not decode (its
// stand-in has no spec: a window duration stored before the schema bounded it) starts no
// pipeline and says why on the object, with a raw patch (a typed write could not decode
// the answer).
func TestUndecodableTriggerStartsNothing(t *testing.T) {
	trig := triggertest.Trigger()
	f := newFixture(t, objs(trig, newTemplate("retire-node"), triggertest.Node("node-1", 0, retiring)))
	raw := &recordingPatcher{}
	f.c.undecodable, f.c.raw = decodeErrs{"retire": errors.New(`time: invalid duration "9999999999h"`)}, raw

	f.sync("retire")
	assert.Empty(t, f.writes(), "no pipeline, no typed write")
	require.Len(t, raw.bodies, 1)
	status := raw.bodies[0]["status"].(map[string]any)
	ready := status["conditions"].([]any)[0].(map[string]any)
	assert.Equal(t, "False", ready["status"])
	assert.Equal(t, v1alpha1.ReasonUndecodable, ready["reason"])
	assert.Contains(t, ready["message"], `cannot decode this trigger (time: invalid duration "9999999999h")`)
	assert.Equal(t, []string{"Warning Undecodable"}, f.eventReasons())
}
