package archive

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
)

// ListOptions choose the records List returns.
type ListOptions struct {
	Namespace string          // "" for every namespace
	Labels    labels.Selector // nil or Everything for all
	// Fields are exact matches on the history API's fields: metadata.name,
	// pipeline.name, pipeline.uid, state, phase, trigger and object; another key is
	// ErrUnsupportedField.
	Fields map[string]string
	// FinishedAfter and FinishedBefore bound Finished, both exclusive; zero: unbounded.
	FinishedAfter, FinishedBefore time.Time
	// Limit: 0 for no limit; otherwise at most Limit records, and a Continue when more
	// exist.
	Limit int64
	// Continue is a token from a previous ListResult, with the same other options; a
	// token List did not make is ErrBadContinue.
	Continue string
	// MaxBytes, when above 0, ends a page before the record whose Body would take the
	// page's Bodies past it (a page holds at least one record), with a Continue: a page
	// of large records is bounded in memory, not only in count.
	MaxBytes int64
}

// ListResult is a page of records.
type ListResult struct {
	Records  []Record
	Continue string // "" when this was the last page
}

// fieldColumn is the column of a field List matches.
func fieldColumn(field string) (string, bool) {
	switch field {
	case "metadata.name":
		return "name", true
	case historyv1alpha1.FieldPipelineName:
		return "pipeline", true
	case historyv1alpha1.FieldPipelineUID:
		return "uid", true
	case historyv1alpha1.FieldState, historyv1alpha1.FieldPhase, historyv1alpha1.FieldTrigger, historyv1alpha1.FieldObject:
		return field, true
	}
	return "", false
}

// query gathers a statement's conditions and their arguments: values only ever
// travel as arguments, never in the SQL text.
type query struct {
	where []string
	args  []any
}

// arg adds v as an argument and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func (q *query) and(cond string) { q.where = append(q.where, cond) }

// List pages through records in the order they were archived (their id). Pages of a
// namespace walk the (namespace, id) index.
func (s *Store) List(ctx context.Context, o ListOptions) (ListResult, error) {
	stmt, limit, err := listQuery(o)
	if err != nil {
		return ListResult{}, fmt.Errorf("archive: list records in %q: %w", o.Namespace, err)
	}
	rows, err := s.pool.Query(ctx, stmt.sql, stmt.args...)
	if err != nil {
		return ListResult{}, fmt.Errorf("archive: list records in %q: %w", o.Namespace, err)
	}
	defer rows.Close()
	var res ListResult
	var last, bytes int64
	for rows.Next() {
		if limit > 0 && int64(len(res.Records)) == limit {
			// The extra row asked for: there is another page, after the last one kept.
			res.Continue = encodeContinue(last)
			break
		}
		r, id, err := scanRecord(rows)
		if err != nil {
			return ListResult{}, fmt.Errorf("archive: list records in %q: %w", o.Namespace, err)
		}
		if o.MaxBytes > 0 && len(res.Records) > 0 && bytes+int64(len(r.Body)) > o.MaxBytes {
			res.Continue = encodeContinue(last)
			break
		}
		bytes += int64(len(r.Body))
		res.Records = append(res.Records, r)
		last = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return ListResult{}, fmt.Errorf("archive: list records in %q: %w", o.Namespace, err)
	}
	return res, nil
}

type statement struct {
	sql  string
	args []any
}

// listQuery is List's statement: WHERE [namespace = $1 AND] id > $n ... ORDER BY id,
// with a LIMIT one past o.Limit to tell whether another page exists.
func listQuery(o ListOptions) (statement, int64, error) {
	if o.Limit < 0 {
		return statement{}, 0, fmt.Errorf("negative limit %d", o.Limit)
	}
	after, err := decodeContinue(o.Continue)
	if err != nil {
		return statement{}, 0, err
	}
	var q query
	if o.Namespace != "" {
		q.and("namespace = " + q.arg(o.Namespace))
	}
	q.and("id > " + q.arg(after))
	if err := selectLabels(&q, o.Labels); err != nil {
		return statement{}, 0, err
	}
	// Sorted, so that the same options make the same statement (and plan cache entry).
	for _, k := range slices.Sorted(maps.Keys(o.Fields)) {
		col, ok := fieldColumn(k)
		if !ok {
			return statement{}, 0, fmt.Errorf("%w %q", ErrUnsupportedField, k)
		}
		q.and(col + " = " + q.arg(o.Fields[k]))
	}
	if !o.FinishedAfter.IsZero() {
		q.and("finished > " + q.arg(o.FinishedAfter))
	}
	if !o.FinishedBefore.IsZero() {
		q.and("finished < " + q.arg(o.FinishedBefore))
	}
	sql := "SELECT " + recordColumns + " FROM pipeline_records WHERE " + strings.Join(q.where, " AND ") + " ORDER BY id"
	if o.Limit > 0 {
		sql += " LIMIT " + q.arg(o.Limit+1)
	}
	return statement{sql: sql, args: q.args}, o.Limit, nil
}

// A continue token is the last id of the page before, base64-encoded: opaque to
// clients, and a page starts after it however records were deleted since.
func encodeContinue(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10)))
}

// decodeContinue is the id a token names, 0 for none.
func decodeContinue(token string) (int64, error) {
	if token == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrBadContinue, token)
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: %q", ErrBadContinue, token)
	}
	return id, nil
}
