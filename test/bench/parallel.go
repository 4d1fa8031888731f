package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// forEach calls do for 0..n-1 from workers goroutines. The first failure stops the others
// at their next item (ctx is cancelled); the failures are returned together, and a run cut
// short by ctx says so.
func forEach(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(ctx, i); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if len(failed) == 0 && ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(failed...)
}

// unthrottled is base without client-side rate limit, as the benchmark's own clients are.
func unthrottled(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// unthrottledClient is a client of the benchmark's own.
func unthrottledClient(base *rest.Config) (kubernetes.Interface, error) {
	kube, err := kubernetes.NewForConfig(unthrottled(base))
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return kube, nil
}
