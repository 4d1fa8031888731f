// Package archive keeps finished pipelines in PostgreSQL: a record per (UID,
// Generation, State) with the whole pipeline as JSON, and the pipeline's Events, so
// that they outlive the pipeline object and its retention in the cluster.
package archive

import (
	"errors"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// State is what happened to a pipeline that a record keeps; a pipeline has at most one
// record per (UID, Generation, State). Its values are the Pipeline API's
// (v1alpha1.ArchiveSucceeded, ...), whose status says which state was archived last.
type State = v1alpha1.ArchiveState

// validState tells whether s is one of the states a record keeps.
func validState(s State) bool {
	switch s {
	case v1alpha1.ArchiveSucceeded, v1alpha1.ArchiveFailed, v1alpha1.ArchiveDeleted, v1alpha1.ArchiveOrphaned, v1alpha1.ArchiveRemoved:
		return true
	}
	return false
}

// MaxBodyBytes bounds a record's Body: more than the API server's own limit on an
// object (about 1.5 MiB in etcd), with room for a status the server never stored whole.
const MaxBodyBytes = 4 << 20

var (
	// ErrNotFound: no record by that name.
	ErrNotFound = errors.New("record not found")
	// ErrUnsupportedField: ListOptions.Fields has a key List cannot match.
	ErrUnsupportedField = errors.New("unsupported field")
	// ErrBadContinue: ListOptions.Continue is not a token List returned.
	ErrBadContinue = errors.New("bad continue token")
	// ErrBodyTooLarge: Put was given a Body over MaxBodyBytes; putting it again fails
	// again, so a writer should put a smaller Body (without the status, say).
	ErrBodyTooLarge = errors.New("body over MaxBodyBytes")
)

// Record is the archive's copy of a pipeline in one State.
type Record struct {
	UID        string
	Generation int64
	State      State
	Namespace  string
	Name       string            // the record's name: historyv1alpha1.RecordName(...); Put fills it in when empty
	Pipeline   string            // the pipeline's name
	Phase      string            // the pipeline's phase at that state
	Trigger    string            // the trigger that made it, "" if none
	Object     string            // the object the trigger matched (e.g. a node name), "" if none
	Creator    string            // who created the pipeline, "" if unknown
	Labels     map[string]string // the pipeline's labels
	Created    time.Time         // the pipeline's creationTimestamp
	Finished   time.Time         // when it reached this state
	Archived   time.Time         // set by the store (database now()) on insert; ignored by Put
	Body       []byte            // the whole pipeline as JSON; opaque to the store, returned byte for byte
}
