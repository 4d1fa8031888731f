package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
)

// Store is the archive in one PostgreSQL database; safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects to dsn, migrates the schema to the newest version (under a session
// lock, so replicas starting at once migrate once), and returns the store.
func Open(ctx context.Context, dsn string) (*Store, error) {
	// pgconn redacts the password from its parse errors.
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("archive: parse dsn: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("archive: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("archive: migrate schema in %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the store's connections.
func (s *Store) Close() { s.pool.Close() }

// Ping tells whether the database answers (for readiness and conditions).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("archive: ping: %w", err)
	}
	return nil
}

// recordColumns are a record's columns as scanRecord reads them.
const recordColumns = `id, uid, generation, state, namespace, name, pipeline, phase, trigger, object,
	creator, labels, created, finished, archived, body`

// scanRecord reads recordColumns; times come back in UTC, whatever the session's zone.
func scanRecord(row pgx.Row) (Record, int64, error) {
	var r Record
	var id int64
	err := row.Scan(&id, &r.UID, &r.Generation, &r.State, &r.Namespace, &r.Name, &r.Pipeline, &r.Phase,
		&r.Trigger, &r.Object, &r.Creator, &r.Labels, &r.Created, &r.Finished, &r.Archived, &r.Body)
	r.Created, r.Finished, r.Archived = r.Created.UTC(), r.Finished.UTC(), r.Archived.UTC()
	return r, id, err
}

const putSQL = `INSERT INTO pipeline_records
	(uid, generation, state, namespace, name, pipeline, phase, trigger, object, creator, labels, created, finished, body)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
	ON CONFLICT (uid, generation, state) DO NOTHING`

// Put writes r unless a record with its UID, Generation and State exists, so a writer
// killed between Put and recording that it wrote can Put again. inserted says whether
// this call wrote it. Only a conflict on (UID, Generation, State) is ignored: a name
// taken by another pipeline's record is an error, not a silent loss.
func (s *Store) Put(ctx context.Context, r Record) (inserted bool, err error) {
	args, err := putArgs(&r)
	if err != nil {
		return false, fmt.Errorf("archive: put record %s/%s: %w", r.Namespace, r.Name, err)
	}
	tag, err := s.pool.Exec(ctx, putSQL, args...)
	if err != nil {
		return false, fmt.Errorf("archive: put record %s/%s: %w", r.Namespace, r.Name, nameTaken(err))
	}
	return tag.RowsAffected() == 1, nil
}

// PutBatch puts many records in one round trip, each as Put does (an existing record of
// the same UID, generation and state stays); it returns how many it wrote. For imports
// and benchmarks: the engine puts one record at a time, as each pipeline finishes.
func (s *Store) PutBatch(ctx context.Context, records []Record) (int, error) {
	batch := &pgx.Batch{}
	for i := range records {
		args, err := putArgs(&records[i])
		if err != nil {
			return 0, fmt.Errorf("archive: put record %s/%s: %w", records[i].Namespace, records[i].Name, err)
		}
		batch.Queue(putSQL, args...)
	}
	results := s.pool.SendBatch(ctx, batch)
	defer func() { _ = results.Close() }()
	written := 0
	for i := range records {
		tag, err := results.Exec()
		if err != nil {
			return written, fmt.Errorf("archive: put record %s/%s: %w", records[i].Namespace, records[i].Name, nameTaken(err))
		}
		written += int(tag.RowsAffected())
	}
	return written, results.Close()
}

// putArgs checks r, fills in its name when empty, and returns putSQL's arguments.
func putArgs(r *Record) ([]any, error) {
	if r.Name == "" {
		r.Name = historyv1alpha1.RecordName(r.Pipeline, r.UID, r.Generation, r.State)
	}
	switch {
	case r.UID == "" || r.Namespace == "" || r.Pipeline == "":
		return nil, errors.New("UID, Namespace and Pipeline are required")
	case !validState(r.State):
		return nil, fmt.Errorf("unknown state %q", r.State)
	case len(r.Body) > MaxBodyBytes:
		return nil, fmt.Errorf("%w: %d bytes", ErrBodyTooLarge, len(r.Body))
	}
	lbls := r.Labels
	if lbls == nil {
		lbls = map[string]string{} // '{}', not JSON null
	}
	body := r.Body
	if body == nil {
		body = []byte{} // NOT NULL
	}
	return []any{r.UID, r.Generation, string(r.State), r.Namespace, r.Name, r.Pipeline,
		text(r.Phase), text(r.Trigger), text(r.Object), text(r.Creator), lbls, r.Created, r.Finished, body}, nil
}

// nameTaken says so when err is the unique name's violation: a name taken by another
// pipeline's record is an error, not a silent loss.
func nameTaken(err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.ConstraintName == "pipeline_records_name" {
		return fmt.Errorf("the name is taken by another pipeline's record: %w", err)
	}
	return err
}

// text makes a free-form string one PostgreSQL's text takes: no NUL, valid UTF-8. A
// message the API server passed along must not make its record fail forever.
func text(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// Has tells whether the record of (uid, generation, state) exists.
func (s *Store) Has(ctx context.Context, uid string, generation int64, state State) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pipeline_records
		WHERE uid = $1 AND generation = $2 AND state = $3)`, uid, generation, string(state)).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("archive: look up record of %s generation %d %s: %w", uid, generation, state, err)
	}
	return ok, nil
}

// Get returns the record named name in namespace; ErrNotFound when none.
func (s *Store) Get(ctx context.Context, namespace, name string) (Record, error) {
	r, _, err := scanRecord(s.pool.QueryRow(ctx,
		`SELECT `+recordColumns+` FROM pipeline_records WHERE namespace = $1 AND name = $2`, namespace, name))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("archive: get record %s/%s: %w", namespace, name, err)
	}
	return r, nil
}

// deleteSQL removes the records archived before $1 and the Events of the pipelines
// left with no record, so that events do not outgrow the records. The statements of
// one query share a snapshot: the records still there are those archived at $1 or
// later.
const deleteSQL = `WITH gone AS (
		DELETE FROM pipeline_records WHERE archived < $1 RETURNING uid
	), events AS (
		DELETE FROM pipeline_events e
		WHERE e.pipeline_uid IN (SELECT uid FROM gone)
		AND NOT EXISTS (SELECT 1 FROM pipeline_records r WHERE r.uid = e.pipeline_uid AND r.archived >= $1)
	)
	SELECT count(*) FROM gone`

// DeleteArchivedBefore removes the records archived before t (retention of the archive
// itself), with the Events of pipelines left without a record, and returns how many
// records it removed.
func (s *Store) DeleteArchivedBefore(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, deleteSQL, t).Scan(&n); err != nil {
		return 0, fmt.Errorf("archive: delete records archived before %s: %w", t.Format(time.RFC3339), err)
	}
	return n, nil
}
