package fairqueue

import "k8s.io/client-go/util/workqueue"

// tryGet is Get that returns at once, false when nothing may be processed now.
func (q *Queue[T]) tryGet() (T, bool) {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	item, ok := q.next()
	if ok {
		q.metrics.get(item)
		q.processing.Insert(item)
		q.dirty.Delete(item)
	}
	return item, ok
}

// settled tells whether workers serving the queue took all they may: every one is busy,
// or no item may be taken now.
func (q *Queue[T]) settled(workers int) bool {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	_, e := q.first()
	return q.processing.Len() >= workers || e == nil
}

type fakeMetric struct {
	value float64
	count int
}

func (m *fakeMetric) Inc()              { m.value++ }
func (m *fakeMetric) Dec()              { m.value-- }
func (m *fakeMetric) Set(v float64)     { m.value = v }
func (m *fakeMetric) Observe(v float64) { m.value += v; m.count++ }

type fakeMetrics struct {
	depth, adds, latency, work, unfinished, longest, retries *fakeMetric
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{&fakeMetric{}, &fakeMetric{}, &fakeMetric{}, &fakeMetric{}, &fakeMetric{}, &fakeMetric{}, &fakeMetric{}}
}

func (f *fakeMetrics) NewDepthMetric(string) workqueue.GaugeMetric            { return f.depth }
func (f *fakeMetrics) NewAddsMetric(string) workqueue.CounterMetric           { return f.adds }
func (f *fakeMetrics) NewLatencyMetric(string) workqueue.HistogramMetric      { return f.latency }
func (f *fakeMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return f.work }
func (f *fakeMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return f.unfinished
}
func (f *fakeMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return f.longest
}
func (f *fakeMetrics) NewRetriesMetric(string) workqueue.CounterMetric { return f.retries }
