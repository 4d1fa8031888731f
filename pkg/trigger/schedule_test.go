package trigger

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// panickingSchedule is a cron.Schedule whose Next panics.
type panickingSchedule struct{}

func (panickingSchedule) Next(time.Time) time.Time { panic("index out of range") }

// TestScheduleRecoversPanics: a cron parser or schedule that panics, on input nobody
// foresaw, is the trigger's error, not the end of the operator.
func TestScheduleRecoversPanics(t *testing.T) {
	tests := []struct {
		name    string
		parse   func(string) (cron.Schedule, error)
		wantErr string
	}{
		{
			name:    "the parser panics",
			parse:   func(string) (cron.Schedule, error) { panic("slice bounds out of range [:-1]") },
			wantErr: `maintenanceWindow.schedule "0 3 * * *": the cron parser failed: slice bounds out of range [:-1]`,
		},
		{
			name:    "the schedule's Next panics",
			parse:   func(string) (cron.Schedule, error) { return panickingSchedule{}, nil },
			wantErr: `maintenanceWindow.schedule "0 3 * * *": the cron schedule failed: index out of range`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() {
				var s schedule
				if s, err = parseScheduleWith(tt.parse, "0 3 * * *"); err == nil {
					_, err = s.next(start)
				}
			})
			require.Error(t, err)
			assert.Equal(t, tt.wantErr, err.Error())
		})
	}
}
