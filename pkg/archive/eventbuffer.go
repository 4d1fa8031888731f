package archive

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// EventAdder appends Events to the archive; *Store is one.
type EventAdder interface {
	AddEvents(ctx context.Context, events []Event) error
}

// EventBuffer collects the Events the operator records for pipelines and writes them to
// the archive in batches, off the engine's path: Add never blocks, and a full buffer
// drops what does not fit (counted, and said in the log) rather than slow a sync. The
// API server's own copy of an Event is not read back: that would cost a request a
// pipeline.
type EventBuffer struct {
	to       EventAdder
	capacity int
	interval time.Duration

	mu      sync.Mutex
	pending []Event
	dropped int
	// flush wakes Run when a batch is full.
	flush chan struct{}
}

// Defaults of NewEventBuffer: a batch is written when full or every second, and at most
// this many Events wait (a few MiB at the Events' bounded size).
const (
	DefaultEventBatch    = 500
	DefaultEventCapacity = 10000
	eventWriteTimeout    = 10 * time.Second
)

// NewEventBuffer returns a buffer writing to to every interval, or when a batch is full,
// holding at most capacity Events.
func NewEventBuffer(to EventAdder, capacity int, interval time.Duration) *EventBuffer {
	return &EventBuffer{to: to, capacity: capacity, interval: interval, flush: make(chan struct{}, 1)}
}

// Add queues e for the archive; it never blocks.
func (b *EventBuffer) Add(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) >= b.capacity {
		b.dropped++
		return
	}
	b.pending = append(b.pending, e)
	if len(b.pending) >= DefaultEventBatch {
		select {
		case b.flush <- struct{}{}:
		default:
		}
	}
}

// Run writes the queued Events until ctx ends, then writes what is left once.
func (b *EventBuffer) Run(ctx context.Context) {
	ticker := time.NewTicker(b.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			b.write(context.WithoutCancel(ctx))
			return
		case <-ticker.C:
		case <-b.flush:
		}
		b.write(ctx)
	}
}

// write writes what is queued, a batch at a time; a batch the archive refuses is kept for
// the next write while there is room.
func (b *EventBuffer) write(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		b.mu.Lock()
		batch := b.pending[:min(len(b.pending), DefaultEventBatch)]
		b.pending = b.pending[len(batch):]
		dropped := b.dropped
		b.dropped = 0
		b.mu.Unlock()
		if dropped > 0 {
			logger.Info("Events not archived: the buffer was full", "dropped", dropped)
		}
		if len(batch) == 0 {
			return
		}
		writeCtx, cancel := context.WithTimeout(ctx, eventWriteTimeout)
		err := b.to.AddEvents(writeCtx, batch)
		cancel()
		if err != nil {
			logger.Error(err, "Archive Events", "events", len(batch))
			b.mu.Lock()
			room := max(0, b.capacity-len(b.pending))
			b.dropped += len(batch) - min(room, len(batch))
			b.pending = append(batch[:min(room, len(batch)):min(room, len(batch))], b.pending...)
			b.mu.Unlock()
			return
		}
	}
}
