package historyapi

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/stepwise-dev/stepwise/pkg/archive"
)

// memArchive is an Archive in memory, with the store's meaning: records in the order
// they were archived, continue tokens that are where a page ended, the same errors. It
// remembers what it was asked.
type memArchive struct {
	mu      sync.Mutex
	records []archive.Record
	events  map[string][]archive.Event // by pipeline UID

	err        error // when set, every call fails with it
	eventsErr  error // when set, Events fails with it
	lists      []archive.ListOptions
	eventCalls []int // the limit of each call
}

var _ Archive = (*memArchive)(nil)

func (m *memArchive) Get(_ context.Context, namespace, name string) (archive.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return archive.Record{}, m.err
	}
	for _, r := range m.records {
		if r.Namespace == namespace && r.Name == name {
			return r, nil
		}
	}
	return archive.Record{}, fmt.Errorf("archive: get record %s/%s: %w", namespace, name, archive.ErrNotFound)
}

func (m *memArchive) List(_ context.Context, o archive.ListOptions) (archive.ListResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists = append(m.lists, o)
	if m.err != nil {
		return archive.ListResult{}, m.err
	}
	after := 0
	if o.Continue != "" {
		n, err := strconv.Atoi(o.Continue)
		if err != nil || n <= 0 {
			return archive.ListResult{}, fmt.Errorf("archive: list records in %q: %w: %q", o.Namespace, archive.ErrBadContinue, o.Continue)
		}
		after = n
	}
	var res archive.ListResult
	for i, r := range m.records {
		if i < after || !matches(r, o) {
			continue
		}
		if o.Limit > 0 && int64(len(res.Records)) == o.Limit {
			res.Continue = strconv.Itoa(i)
			break
		}
		res.Records = append(res.Records, r)
	}
	return res, nil
}

func matches(r archive.Record, o archive.ListOptions) bool {
	if o.Namespace != "" && r.Namespace != o.Namespace {
		return false
	}
	if o.Labels != nil && !o.Labels.Matches(labels.Set(r.Labels)) {
		return false
	}
	values := map[string]string{
		"metadata.name": r.Name, "pipeline.name": r.Pipeline, "pipeline.uid": r.UID, "state": string(r.State),
		"phase": r.Phase, "trigger": r.Trigger, "object": r.Object,
	}
	for k, v := range o.Fields {
		if values[k] != v {
			return false
		}
	}
	if !o.FinishedAfter.IsZero() && !r.Finished.After(o.FinishedAfter) {
		return false
	}
	if !o.FinishedBefore.IsZero() && !r.Finished.Before(o.FinishedBefore) {
		return false
	}
	return true
}

func (m *memArchive) Events(_ context.Context, pipelineUID string, limit int) ([]archive.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.eventCalls = append(m.eventCalls, limit)
	if m.err != nil {
		return nil, m.err
	}
	if m.eventsErr != nil {
		return nil, m.eventsErr
	}
	events := m.events[pipelineUID]
	if limit > 0 && len(events) > limit {
		events = events[:limit]
	}
	return events, nil
}

// asked returns what List and Events were asked so far.
func (m *memArchive) asked() ([]archive.ListOptions, []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]archive.ListOptions(nil), m.lists...), append([]int(nil), m.eventCalls...)
}
