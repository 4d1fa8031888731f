package trigger

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// window is where a trigger stands against its maintenance window at a time.
type window struct {
	// open: pipelines may start now.
	open bool
	// change is when that changes: the window's close while open, its next opening while
	// closed; zero without a window.
	change time.Time
}

// windowAt evaluates w at now. The window opened at the schedule's last time before now is
// open when now is within its duration: the schedule's first time after now-duration is
// then at or before now.
func windowAt(w *v1alpha1.MaintenanceWindow, now time.Time) (window, error) {
	if w == nil {
		return window{open: true}, nil
	}
	if w.Duration.Duration <= 0 {
		return window{}, fmt.Errorf("maintenanceWindow.duration must be positive, got %s", w.Duration.Duration)
	}
	loc := time.UTC
	if w.TimeZone != "" {
		l, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			return window{}, fmt.Errorf("maintenanceWindow.timeZone %q: %w", w.TimeZone, err)
		}
		loc = l
	}
	schedule, err := cron.ParseStandard(w.Schedule)
	if err != nil {
		return window{}, fmt.Errorf("maintenanceWindow.schedule %q: %w", w.Schedule, err)
	}
	local := now.In(loc)
	opened := schedule.Next(local.Add(-w.Duration.Duration))
	if opened.IsZero() {
		return window{}, fmt.Errorf("maintenanceWindow.schedule %q never opens", w.Schedule)
	}
	if !opened.After(local) {
		return window{open: true, change: opened.Add(w.Duration.Duration)}, nil
	}
	return window{change: opened}, nil
}
