package trigger

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// zonePrefixRefused refuses robfig/cron's TZ=/CRON_TZ= prefix: robfig/cron panics on a
// prefix with no schedule after it, and with one the prefix would override timeZone, the
// one field for a window's zone.
const zonePrefixRefused = "a time zone prefix is not allowed: set maintenanceWindow.timeZone instead"

// schedule is a parsed maintenance window schedule.
type schedule struct {
	spec string
	cron cron.Schedule
}

// parseSchedule parses a standard five-field cron schedule or a descriptor (@daily,
// @every 1h). It never panics: the API server admits what robfig/cron has panicked on,
// and one trigger must not end the operator.
func parseSchedule(spec string) (schedule, error) {
	return parseScheduleWith(cron.ParseStandard, spec)
}

// parseScheduleWith is parseSchedule with the cron parser as a parameter, so that a test
// can make it panic.
func parseScheduleWith(parse func(string) (cron.Schedule, error), spec string) (s schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = schedule{}, fmt.Errorf("maintenanceWindow.schedule %q: the cron parser failed: %v", spec, r)
		}
	}()
	if trimmed := strings.ToUpper(strings.TrimSpace(spec)); strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return schedule{}, fmt.Errorf("maintenanceWindow.schedule %q: %s", spec, zonePrefixRefused)
	}
	c, err := parse(spec)
	if err != nil {
		return schedule{}, fmt.Errorf("maintenanceWindow.schedule %q: %w", spec, err)
	}
	return schedule{spec: spec, cron: c}, nil
}

// next is the schedule's first time after t, zero when there is none within the five
// years robfig/cron looks ahead. It never panics either.
func (s schedule) next(t time.Time) (next time.Time, err error) {
	defer func() {
		if r := recover(); r != nil {
			next, err = time.Time{}, fmt.Errorf("maintenanceWindow.schedule %q: the cron schedule failed: %v", s.spec, r)
		}
	}()
	return s.cron.Next(t), nil
}
