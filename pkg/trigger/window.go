package trigger

import (
	"fmt"
	"time"

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
	// The schema bounds it too; this holds for windows stored before it did.
	if w.Duration.Duration > v1alpha1.MaxWindowDuration {
		return window{}, fmt.Errorf("maintenanceWindow.duration must be at most %s, got %s", v1alpha1.MaxWindowDuration, w.Duration.Duration)
	}
	loc, err := windowLocation(w.TimeZone)
	if err != nil {
		return window{}, err
	}
	sched, err := parseSchedule(w.Schedule)
	if err != nil {
		return window{}, err
	}
	local := now.In(loc)
	opened, err := sched.next(local.Add(-w.Duration.Duration))
	if err != nil {
		return window{}, err
	}
	if opened.IsZero() {
		return window{}, fmt.Errorf("maintenanceWindow.schedule %q never opens", w.Schedule)
	}
	if !opened.After(local) {
		return window{open: true, change: opened.Add(w.Duration.Duration)}, nil
	}
	return window{change: opened}, nil
}

// windowLocation is the zone of a window: UTC by default. time.LoadLocation refuses names
// that climb out of the zone database or are paths; "Local" it would take as the zone of
// the operator's machine, which is no zone a trigger can name, so it is refused too.
func windowLocation(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("maintenanceWindow.timeZone %q: the operator's local zone is not allowed: name an IANA zone such as Europe/Berlin, or UTC", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("maintenanceWindow.timeZone %q: %w", name, err)
	}
	return loc, nil
}
