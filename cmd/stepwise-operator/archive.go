package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
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
