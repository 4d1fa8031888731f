package trigger

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestWindowAt(t *testing.T) {
	weekdays2am := &v1alpha1.MaintenanceWindow{Schedule: "0 2 * * 1-5", Duration: metav1.Duration{Duration: 2 * time.Hour}}
	berlin := &v1alpha1.MaintenanceWindow{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Berlin"}
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return ts
	}
	tests := []struct {
		name       string
		w          *v1alpha1.MaintenanceWindow
		now        string
		wantOpen   bool
		wantChange string
		wantErr    string
	}{
		{name: "no window", now: "2026-11-23T12:00:00Z", wantOpen: true},
		{name: "inside (Monday 03:00)", w: weekdays2am, now: "2026-11-23T03:00:00Z", wantOpen: true, wantChange: "2026-11-23T04:00:00Z"},
		{name: "at the opening", w: weekdays2am, now: "2026-11-23T02:00:00Z", wantOpen: true, wantChange: "2026-11-23T04:00:00Z"},
		{name: "at the close", w: weekdays2am, now: "2026-11-23T04:00:00Z", wantChange: "2026-11-24T02:00:00Z"},
		{name: "Saturday: next Monday", w: weekdays2am, now: "2026-11-28T03:00:00Z", wantChange: "2026-11-30T02:00:00Z"},
		{name: "time zone: 02:00 in Berlin is 01:00 UTC in winter", w: berlin, now: "2026-11-23T01:30:00Z", wantOpen: true, wantChange: "2026-11-23T02:00:00Z"},
		{name: "bad schedule", w: &v1alpha1.MaintenanceWindow{Schedule: "every day", Duration: metav1.Duration{Duration: time.Hour}}, now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "bad zone", w: &v1alpha1.MaintenanceWindow{Schedule: "@daily", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus"}, now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.timeZone"},
		{name: "no duration", w: &v1alpha1.MaintenanceWindow{Schedule: "@daily"}, now: "2026-11-23T01:30:00Z", wantErr: "duration must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := windowAt(tt.w, at(tt.now))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantOpen, got.open)
			if tt.wantChange == "" {
				assert.True(t, got.change.IsZero())
				return
			}
			assert.True(t, at(tt.wantChange).Equal(got.change), "change %s", got.change.UTC())
		})
	}
}

// TestMaintenanceWindowGatesStarts: outside its window a trigger starts nothing, its
// status says when the window opens, and it looks again then; inside, it starts.
func TestMaintenanceWindowGatesStarts(t *testing.T) {
	n1 := newNode("n1", 0, retiring)
	trig := newTrigger()
	// The fixture's clock starts at `start`; the window opens an hour later, for an hour.
	opens := start.Add(time.Hour).UTC()
	trig.Spec.MaintenanceWindow = &v1alpha1.MaintenanceWindow{
		Schedule: fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()),
		Duration: metav1.Duration{Duration: time.Hour},
	}
	f := newFixture(t, objs(trig, newTemplate("retire-node"), n1))
	requeue := f.sync("retire")

	assert.Empty(t, f.pipelineList(), "nothing starts outside the window")
	got := f.trigger("retire")
	assert.Equal(t, ReasonOutsideWindow, readyOf(got).Reason)
	assert.Contains(t, readyOf(got).Message, opens.Format(time.RFC3339))
	require.NotNil(t, got.Status.NextWindow)
	assert.True(t, opens.Equal(got.Status.NextWindow.Time))
	assert.Equal(t, []string{"n1"}, got.Status.Queue)
	assert.LessOrEqual(t, requeue, time.Hour, "it looks again when the window opens")

	f.clock.SetTime(opens.Add(time.Minute))
	f.sync("retire")
	f.pipelineFor("retire", n1)
	got = f.trigger("retire")
	assert.Equal(t, ReasonActive, readyOf(got).Reason)
	assert.Nil(t, got.Status.NextWindow)
}
