package archive

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// selectLabels adds to q a condition per requirement of sel over the labels jsonb
// column, with Kubernetes' meaning: != and notin also match records without the key.
// = and in are containment (@>) and exists is ?, which the GIN index serves. Keys and
// values are arguments, never SQL text.
func selectLabels(q *query, sel labels.Selector) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	reqs, selectable := sel.Requirements()
	if !selectable { // labels.Nothing()
		q.and("false")
		return nil
	}
	for _, r := range reqs {
		key, values := r.Key(), r.ValuesUnsorted()
		switch op := r.Operator(); op {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn:
			docs, err := labelDocs(key, values)
			if err != nil {
				return fmt.Errorf("label selector %q: %w", r.String(), err)
			}
			var cond string
			if len(docs) == 1 {
				cond = "labels @> " + q.arg(docs[0]) + "::jsonb"
			} else {
				cond = "labels @> ANY(" + q.arg(docs) + "::jsonb[])"
			}
			if op == selection.NotEquals || op == selection.NotIn {
				cond = "NOT (" + cond + ")"
			}
			q.and(cond)
		case selection.Exists:
			q.and("labels ? " + q.arg(key) + "::text")
		case selection.DoesNotExist:
			q.and("NOT (labels ? " + q.arg(key) + "::text)")
		case selection.GreaterThan, selection.LessThan:
			if len(values) != 1 {
				return fmt.Errorf("label selector %q: %s takes one value", r.String(), op)
			}
			bound, err := strconv.ParseInt(values[0], 10, 64)
			if err != nil {
				return fmt.Errorf("label selector %q: %w", r.String(), err)
			}
			cmp := ">"
			if op == selection.LessThan {
				cmp = "<"
			}
			// A value that is not an integer matches neither, as in Kubernetes; CASE
			// keeps the cast from seeing it.
			k := q.arg(key)
			q.and("CASE WHEN (labels->>" + k + "::text) ~ '^[0-9]+$' THEN (labels->>" + k + "::text)::numeric " +
				cmp + " " + q.arg(bound) + "::numeric ELSE false END")
		default:
			return fmt.Errorf("label selector %q: unsupported operator %q", r.String(), op)
		}
	}
	return nil
}

// labelDocs are the JSON objects {key: value}, one per value, that a record's labels
// contain when they hold key=value.
func labelDocs(key string, values []string) ([]string, error) {
	docs := make([]string, 0, len(values))
	for _, v := range values {
		b, err := json.Marshal(map[string]string{key: v})
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(b))
	}
	return docs, nil
}
