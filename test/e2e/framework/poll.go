package framework

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollObject gets an object every 100 ms until cond holds of it and returns it; after
// timeout, or on an error getting it, it fails the test, saying what it last saw (the
// object's status, through status) and why.
func PollObject[T any](t testing.TB, timeout time.Duration, get func(context.Context) (T, error), cond func(T) bool, status func(T) any, what string) T {
	t.Helper()
	var last T
	seen := false
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		obj, err := get(ctx)
		if err != nil {
			return false, err
		}
		last, seen = obj, true
		return cond(obj), nil
	})
	if err != nil {
		var lastStatus any
		if seen {
			lastStatus = status(last)
		}
		t.Fatalf("%s: %v; last status: %+v", what, err, lastStatus)
	}
	return last
}

// Count is how many of lines are line.
func Count(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if l == line {
			n++
		}
	}
	return n
}
