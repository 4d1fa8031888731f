package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
	"github.com/stepwise-dev/stepwise/pkg/historyapi"
)

// openArchive opens the archive --archive-dsn-file names and migrates its schema; nil
// when archiving is off.
func openArchive(ctx context.Context, opts *options) (*archive.Store, error) {
	if opts.archiveDSNFile == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(opts.archiveDSNFile)
	if err != nil {
		return nil, fmt.Errorf("read --archive-dsn-file: %w", err)
	}
	dsn := strings.TrimSpace(string(raw))
	if dsn == "" {
		return nil, fmt.Errorf("--archive-dsn-file %s is empty", opts.archiveDSNFile)
	}
	// The error may quote the connection string's host, never its password (pgx's errors
	// leave it out); the string itself is never logged.
	store, err := archive.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open the archive: %w", err)
	}
	return store, nil
}

// archiveEvents sends the Events the operator records for pipelines to the archive, in
// batches, until ctx ends; it returns at once when archiving is off.
func archiveEvents(ctx context.Context, store *archive.Store, events record.EventBroadcaster) {
	if store == nil {
		return
	}
	buffer := archive.NewEventBuffer(store, archive.DefaultEventCapacity, time.Second)
	watch := events.StartEventWatcher(func(e *corev1.Event) {
		if e.InvolvedObject.Kind != "Pipeline" || e.InvolvedObject.APIVersion != v1alpha1.SchemeGroupVersion.String() {
			return
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		buffer.Add(archive.Event{PipelineUID: string(e.InvolvedObject.UID), Type: e.Type, Reason: e.Reason,
			Message: e.Message, Time: at, Count: e.Count})
	})
	go func() {
		<-ctx.Done()
		watch.Stop()
	}()
	go buffer.Run(ctx)
}

// serveHistory serves the archive as history.stepwise.dev on --history-secure-port until
// ctx ends; every replica serves it (reads need no Lease). It returns at once when the
// history API is off.
func serveHistory(ctx context.Context, opts *options, store *archive.Store) error {
	if store == nil || opts.historyPort == 0 {
		return nil
	}
	o := historyapi.DefaultOptions()
	o.BindAddress, o.BindPort = net.ParseIP(opts.historyAddress), opts.historyPort
	o.TLSCertFile, o.TLSKeyFile, o.CertDir = opts.historyCertFile, opts.historyKeyFile, opts.historyCertDir
	o.Kubeconfig = opts.kubeconfig
	server, err := historyapi.New(o, store)
	if err != nil {
		return fmt.Errorf("start the history API: %w", err)
	}
	logger := klog.FromContext(ctx)
	logger.Info("Serving", "endpoint", "history", "address", server.Addr().String(), "tls", true)
	go func() {
		if err := server.Run(ctx); err != nil {
			logger.Error(err, "History API stopped")
		}
	}()
	return nil
}

// archivePruneEvery is how often the archive's old records are deleted.
const archivePruneEvery = time.Hour

// pruneArchive deletes the records older than --archive-retention, at once and then every
// archivePruneEvery, until ctx ends; it returns at once when records are kept for ever.
// Every replica prunes: the deletion is idempotent and cheap when there is nothing to do.
func pruneArchive(ctx context.Context, store *archive.Store, retention time.Duration) {
	if store == nil || retention <= 0 {
		return
	}
	logger := klog.FromContext(ctx)
	go func() {
		ticker := time.NewTicker(archivePruneEvery)
		defer ticker.Stop()
		for {
			pruneCtx, cancel := context.WithTimeout(ctx, archivePruneEvery/2)
			n, err := store.DeleteArchivedBefore(pruneCtx, time.Now().Add(-retention))
			cancel()
			switch {
			case err != nil:
				logger.Error(err, "Prune the archive")
			case n > 0:
				logger.Info("Pruned the archive", "records", n, "olderThan", retention)
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
}
