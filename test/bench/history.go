package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
)

// historyResult is what the history phase measured: lists of one namespace's records,
// a page of 100, through the API server's aggregation layer, with the archive holding
// Records records.
type historyResult struct {
	Records        int     `json:"records"`
	Namespaces     int     `json:"namespaces"`
	FillSeconds    float64 `json:"fillSeconds"`
	Lists          int     `json:"lists"`
	ListP50Millis  float64 `json:"listP50Millis"`
	ListP99Millis  float64 `json:"listP99Millis"`
	ListMaxMillis  float64 `json:"listMaxMillis"`
	PageTwoP99Msec float64 `json:"pageTwoP99Millis"`
}

// historyNamespaces spreads the history phase's records: a tenant's list reads its own.
const historyNamespaces = 100

// historyPhase fills the archive with cfg.historyRecords records of pipelines of three
// steps (the body a real one has), then lists one namespace's records, --limit 100, as
// kubectl does, cfg.historyLists times, and its second page as many times.
func (b *bench) historyPhase(ctx context.Context) error {
	store, err := archive.Open(ctx, b.cluster.Archive().Server.DSN)
	if err != nil {
		return err
	}
	defer store.Close()
	body, err := json.Marshal(finishedPipeline(b.cfg.k))
	if err != nil {
		return fmt.Errorf("encode a finished pipeline: %w", err)
	}
	res := &historyResult{Records: b.cfg.historyRecords, Namespaces: historyNamespaces}
	b.res.History = res
	start := time.Now()
	const batch = 1000
	for i := 0; i < b.cfg.historyRecords; i += batch {
		records := make([]archive.Record, 0, batch)
		for j := i; j < min(i+batch, b.cfg.historyRecords); j++ {
			records = append(records, archive.Record{
				UID: fmt.Sprintf("%08x-0000-4000-8000-%012x", j, j), Generation: 1, State: v1alpha1.ArchiveSucceeded,
				Namespace: fmt.Sprintf("tenant-%02d", j%historyNamespaces), Pipeline: fmt.Sprintf("retire-%d", j),
				Phase: string(v1alpha1.PipelineSucceeded), Trigger: "retire", Object: fmt.Sprintf("node-%d", j),
				Labels:  map[string]string{"stepwise.dev/trigger": "retire"},
				Created: start.Add(-time.Hour), Finished: start, Body: body,
			})
		}
		if _, err := store.PutBatch(ctx, records); err != nil {
			return err
		}
	}
	res.FillSeconds = time.Since(start).Seconds()
	logf("History: %d records archived in %.0f s; listing", b.cfg.historyRecords, res.FillSeconds)

	records := b.client.HistoryV1alpha1().PipelineRecords("tenant-42")
	// The APIService is available once the aggregator reached the operator.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := records.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("the history API never answered: %w", err)
	}
	var first, second []time.Duration
	for range b.cfg.historyLists {
		t0 := time.Now()
		page, err := records.List(ctx, metav1.ListOptions{Limit: 100})
		if err != nil {
			return fmt.Errorf("list records: %w", err)
		}
		first = append(first, time.Since(t0))
		if len(page.Items) != 100 || page.Continue == "" {
			return fmt.Errorf("a page of %d records, continue %q: want 100 and a continue (-history-records at least %d)",
				len(page.Items), page.Continue, 101*historyNamespaces)
		}
		t0 = time.Now()
		if _, err := records.List(ctx, metav1.ListOptions{Limit: 100, Continue: page.Continue}); err != nil {
			return fmt.Errorf("list records' second page: %w", err)
		}
		second = append(second, time.Since(t0))
	}
	res.Lists = len(first)
	res.ListP50Millis, res.ListP99Millis, res.ListMaxMillis = millis(quantile(first, 0.5)), millis(quantile(first, 0.99)), millis(slices.Max(first))
	res.PageTwoP99Msec = millis(quantile(second, 0.99))
	return nil
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// finishedPipeline is a pipeline of k steps as it is when it finished: what a record's
// body holds.
func finishedPipeline(k int) *v1alpha1.Pipeline {
	now := metav1.Now()
	p := &v1alpha1.Pipeline{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Pipeline"},
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: "tenant", Generation: 1},
		Status:     v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineSucceeded, Progress: fmt.Sprintf("%d/%d", k, k), CompletionTime: &now},
	}
	for i := range k {
		name := fmt.Sprintf("step-%d", i)
		p.Spec.Steps = append(p.Spec.Steps, v1alpha1.Step{Name: name, Executor: "node.drain", With: map[string]string{"node": "node-1", "timeout": "10m"}})
		p.Status.Steps = append(p.Status.Steps, v1alpha1.StepStatus{Name: name, Executor: "node.drain", Phase: v1alpha1.StepSucceeded,
			Hook: v1alpha1.HookPostCreate, Attempts: 1, StartTime: &now, CompletionTime: &now, Message: "node drained, 12 pods evicted",
			Outputs: map[string]string{"evicted": "12"}})
	}
	return p
}
