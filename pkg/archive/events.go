package archive

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Event is a Kubernetes Event about a pipeline, kept with its records.
type Event struct {
	PipelineUID           string
	Type, Reason, Message string
	Time                  time.Time
	Count                 int32
}

// AddEvents appends events in one COPY.
func (s *Store) AddEvents(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"pipeline_events"},
		[]string{"pipeline_uid", "type", "reason", "message", "time", "count"},
		pgx.CopyFromSlice(len(events), func(i int) ([]any, error) {
			e := events[i]
			return []any{e.PipelineUID, text(e.Type), text(e.Reason), text(e.Message), e.Time, e.Count}, nil
		}))
	if err != nil {
		return fmt.Errorf("archive: add %d events of %s: %w", len(events), events[0].PipelineUID, err)
	}
	return nil
}

// Events returns a pipeline's Events, oldest first (by Time, then as added), at most
// limit of them; limit <= 0 for all.
func (s *Store) Events(ctx context.Context, pipelineUID string, limit int) ([]Event, error) {
	// LIMIT NULL is no limit.
	n := pgtype.Int8{Int64: int64(limit), Valid: limit > 0}
	rows, err := s.pool.Query(ctx, `SELECT pipeline_uid, type, reason, message, time, count
		FROM pipeline_events WHERE pipeline_uid = $1 ORDER BY time, id LIMIT $2`, pipelineUID, n)
	if err != nil {
		return nil, fmt.Errorf("archive: events of %s: %w", pipelineUID, err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.PipelineUID, &e.Type, &e.Reason, &e.Message, &e.Time, &e.Count)
		e.Time = e.Time.UTC()
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("archive: events of %s: %w", pipelineUID, err)
	}
	return events, nil
}
