package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// kindAll is the kind of the change that means "reload everything shown".
const kindAll = "*"

// change is one message of the change stream: the object of that kind, namespace and
// name changed (or one of its Events did). The page fetches it again if it shows it.
type change struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// hub coalesces the informers' changes and fans them out to the open streams: each window
// it sends every object that changed once, or one reload when more than maxBurst did. It
// never blocks an informer: a slow stream's queue collapses into a reload too.
type hub struct {
	window   time.Duration
	maxBurst int

	mu sync.Mutex
	// pending are the changes of the current window, in arrival order, without repeats;
	// overflow says more than maxBurst arrived (pending then stops growing).
	pending  []change
	seen     map[change]struct{}
	overflow bool
	subs     map[*subscriber]struct{}
	closed   bool
}

func newHub(window time.Duration, maxBurst int) *hub {
	return &hub{window: window, maxBurst: maxBurst, seen: map[change]struct{}{}, subs: map[*subscriber]struct{}{}}
}

// publish records a change for the next flush. Nobody listening, nothing to record.
func (h *hub) publish(c change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.subs) == 0 || h.overflow {
		return
	}
	if _, ok := h.seen[c]; ok {
		return
	}
	if len(h.pending) == h.maxBurst {
		h.overflow = true
		h.pending, h.seen = nil, map[change]struct{}{}
		return
	}
	h.seen[c] = struct{}{}
	h.pending = append(h.pending, c)
}

// run flushes every window until ctx ends, then ends every stream.
func (h *hub) run(ctx context.Context) {
	t := time.NewTicker(h.window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.close()
			return
		case <-t.C:
			h.flush()
		}
	}
}

// flush hands the window's changes to every stream.
func (h *hub) flush() {
	h.mu.Lock()
	batch := h.pending
	if h.overflow {
		batch = []change{{Kind: kindAll}}
	}
	h.pending, h.overflow = nil, false
	clear(h.seen)
	subs := make([]*subscriber, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	for _, s := range subs {
		s.deliver(batch, h.maxBurst)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for s := range h.subs {
		close(s.done)
	}
	clear(h.subs)
}

// subscribe opens a stream's queue; nil once the hub is closed.
func (h *hub) subscribe() *subscriber {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	s := &subscriber{wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.subs[s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

// subscriber is one stream's queue of changes not yet written.
type subscriber struct {
	mu    sync.Mutex
	queue []change
	// wake holds a token while the queue has something; done closes with the hub.
	wake chan struct{}
	done chan struct{}
}

// deliver queues a batch; a queue that grows past maxBurst (a stream that cannot keep
// up) becomes one reload.
func (s *subscriber) deliver(batch []change, maxBurst int) {
	s.mu.Lock()
	switch {
	case len(s.queue) == 1 && s.queue[0].Kind == kindAll:
	case len(s.queue)+len(batch) > maxBurst:
		s.queue = []change{{Kind: kindAll}}
	default:
		s.queue = append(s.queue, batch...)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) take() []change {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// streamChanges is GET /api/events: a Server-Sent Events stream of "change" events,
// with a comment as a ping every pingInterval, until the client goes or the server stops.
func (s *Server) streamChanges(w http.ResponseWriter, r *http.Request) {
	sub := s.hub.subscribe()
	if sub == nil {
		writeError(w, http.StatusServiceUnavailable, "the dashboard is stopping")
		return
	}
	defer s.hub.unsubscribe(sub)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// retry: how long EventSource waits before it reconnects after the stream broke.
	if _, err := fmt.Fprint(w, "retry: 2000\n: connected\n\n"); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	ping := time.NewTicker(s.pingEvery)
	defer ping.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-sub.done:
			return
		case <-ping.C:
			_, err = fmt.Fprint(w, ": ping\n\n")
		case <-sub.wake:
			err = writeChanges(w, sub.take())
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return // the client went
		}
	}
}

func writeChanges(w http.ResponseWriter, changes []change) error {
	for _, c := range changes {
		data, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode change: %w", err)
		}
		if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", data); err != nil {
			return fmt.Errorf("write change: %w", err)
		}
	}
	return nil
}
