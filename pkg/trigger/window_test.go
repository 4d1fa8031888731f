package trigger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
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
		{name: "duration beyond the schema's bound (stored before the bound)", w: &v1alpha1.MaintenanceWindow{Schedule: "@daily", Duration: metav1.Duration{Duration: v1alpha1.MaxWindowDuration + time.Second}}, now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.duration must be at most 168h0m0s, got 168h0m1s"},
		{name: "duration at the bound", w: &v1alpha1.MaintenanceWindow{Schedule: "0 1 * * 1", Duration: metav1.Duration{Duration: v1alpha1.MaxWindowDuration}}, now: "2026-11-23T01:30:00Z", wantOpen: true, wantChange: "2026-11-30T01:00:00Z"},

		// Whatever the API server admits is an error, never a panic nor a hang.
		{name: "TZ= alone (robfig/cron panics on it)", w: hour("TZ=UTC", ""), now: "2026-11-23T01:30:00Z", wantErr: `maintenanceWindow.schedule "TZ=UTC": a time zone prefix is not allowed: set maintenanceWindow.timeZone`},
		{name: "CRON_TZ= alone", w: hour("CRON_TZ=UTC", ""), now: "2026-11-23T01:30:00Z", wantErr: "set maintenanceWindow.timeZone"},
		{name: "TZ= with a schedule: timeZone is the one place of the zone", w: hour("TZ=UTC 0 3 * * *", ""), now: "2026-11-23T01:30:00Z", wantErr: "set maintenanceWindow.timeZone"},
		{name: "CRON_TZ= with a schedule, overriding timeZone", w: hour("CRON_TZ=Asia/Tokyo 0 3 * * *", "Europe/Berlin"), now: "2026-11-23T01:30:00Z", wantErr: "set maintenanceWindow.timeZone"},
		{name: "TZ= with a hostile zone", w: hour("TZ=../../etc/passwd 0 3 * * *", ""), now: "2026-11-23T01:30:00Z", wantErr: "set maintenanceWindow.timeZone"},
		{name: "TZ= behind blanks", w: hour("  TZ=UTC", ""), now: "2026-11-23T01:30:00Z", wantErr: "set maintenanceWindow.timeZone"},
		{name: "tz= in lower case", w: hour("tz=UTC 0 3 * * *", ""), now: "2026-11-23T01:30:00Z", wantErr: "set maintenanceWindow.timeZone"},
		{name: "empty schedule", w: hour("", ""), now: "2026-11-23T01:30:00Z", wantErr: `maintenanceWindow.schedule "":`},
		{name: "blank schedule", w: hour("   ", ""), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "six fields (seconds are not standard)", w: hour("0 0 3 * * *", ""), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "four fields", w: hour("0 3 * *", ""), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "minute out of range", w: hour("61 3 * * *", ""), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "step of zero", w: hour("*/0 3 * * *", ""), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "control characters", w: hour("0 3 * * *\x00\n", ""), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "unknown descriptor", w: hour("@reboot", ""), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.schedule"},
		{name: "never fires (30 February)", w: hour("0 0 30 2 *", ""), now: "2026-11-23T01:30:00Z", wantErr: `maintenanceWindow.schedule "0 0 30 2 *" never opens`},
		{name: "zone climbing out of the zoneinfo", w: hour("@daily", "../../etc/passwd"), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.timeZone"},
		{name: "zone as a path", w: hour("@daily", "/etc/localtime"), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.timeZone"},
		{name: "very long zone", w: hour("@daily", strings.Repeat("Europe/", 1000)+"Berlin"), now: "2026-11-23T01:30:00Z", wantErr: "maintenanceWindow.timeZone"},
		{name: "zone Local: the operator's machine is no zone of the trigger", w: hour("@daily", "Local"), now: "2026-11-23T01:30:00Z", wantErr: `maintenanceWindow.timeZone "Local"`},
		{name: "zone UTC", w: hour("0 1 * * *", "UTC"), now: "2026-11-23T01:30:00Z", wantOpen: true, wantChange: "2026-11-23T02:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := windowAtGuarded(t, tt.w, at(tt.now))
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

// hour is a window of an hour on schedule in zone.
func hour(schedule, zone string) *v1alpha1.MaintenanceWindow {
	return &v1alpha1.MaintenanceWindow{Schedule: schedule, Duration: metav1.Duration{Duration: time.Hour}, TimeZone: zone}
}

// windowAtGuarded is windowAt, with a panic or a hang turned into the test's failure
// rather than the end of the test binary.
func windowAtGuarded(t *testing.T, w *v1alpha1.MaintenanceWindow, now time.Time) (window, error) {
	t.Helper()
	type result struct {
		w     window
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{panic: r}
			}
		}()
		got, err := windowAt(w, now)
		done <- result{w: got, err: err}
	}()
	select {
	case r := <-done:
		require.Nil(t, r.panic, "windowAt panicked")
		return r.w, r.err
	case <-time.After(10 * time.Second):
		require.FailNow(t, "windowAt hangs")
		return window{}, nil
	}
}

// TestMaintenanceWindowGatesStarts: outside its window a trigger starts nothing, its
// status says when the window opens, and it looks again then; inside, it starts.
func TestMaintenanceWindowGatesStarts(t *testing.T) {
	n1 := triggertest.Node("n1", 0, retiring)
	trig := triggertest.Trigger()
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
	assert.Equal(t, v1alpha1.TriggerReasonOutsideWindow, readyOf(got).Reason)
	assert.Contains(t, readyOf(got).Message, opens.Format(time.RFC3339))
	require.NotNil(t, got.Status.NextWindow)
	assert.True(t, opens.Equal(got.Status.NextWindow.Time))
	assert.Equal(t, []string{"n1"}, got.Status.Queue)
	assert.LessOrEqual(t, requeue, time.Hour, "it looks again when the window opens")

	f.clock.SetTime(opens.Add(time.Minute))
	f.sync("retire")
	f.pipelineFor("retire", n1)
	got = f.trigger("retire")
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(got).Reason)
	assert.Nil(t, got.Status.NextWindow)
}
