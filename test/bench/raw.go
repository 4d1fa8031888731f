package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// rawResult is the write rate of a plain client: every ConfigMap created, then updated.
type rawResult struct {
	Label        string  `json:"label"`
	Writes       int     `json:"writes"`
	Workers      int     `json:"workers"`
	QPS          float64 `json:"qps"`
	Burst        int     `json:"burst"`
	Seconds      float64 `json:"seconds"`
	WritesPerSec float64 `json:"writesPerSecond"`
}

// measureRaw creates n ConfigMaps and updates each once from workers goroutines, with a
// client limited to qps/burst as the operator's is (qps < 0: no client-side limit), then
// deletes them.
func measureRaw(ctx context.Context, base *rest.Config, ns, label string, n, workers int, qps float64, burst int) (rawResult, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = float32(qps), burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return rawResult{}, fmt.Errorf("create client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name:   fmt.Sprintf("raw-%s-%05d", label, i),
					Labels: map[string]string{"bench": label},
				}, Data: map[string]string{"n": "0"}}
				got, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
				if err != nil {
					errs <- fmt.Errorf("create configmap %s: %w", cm.Name, err)
					return
				}
				got.Data["n"] = strconv.Itoa(i)
				if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
					errs <- fmt.Errorf("update configmap %s: %w", cm.Name, err)
					return
				}
			}
		})
	}
	var feedErr error
feed:
	for i := range n {
		select {
		case next <- i:
		case feedErr = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	if feedErr == nil {
		select {
		case feedErr = <-errs:
		default:
		}
	}
	cleanupErr := client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "bench=" + label})
	if feedErr != nil {
		return rawResult{}, feedErr
	}
	if cleanupErr != nil {
		return rawResult{}, fmt.Errorf("delete the benchmark's configmaps: %w", cleanupErr)
	}
	return rawResult{
		Label: label, Writes: 2 * n, Workers: workers, QPS: qps, Burst: burst,
		Seconds: elapsed.Seconds(), WritesPerSec: float64(2*n) / elapsed.Seconds(),
	}, nil
}
