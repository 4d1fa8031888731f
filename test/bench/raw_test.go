package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWriteLimit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		raw, writes float64
		qps         float64
		burst       int
		want        float64
	}{
		// The default run: as many writes as the raw test, which the client's limit bound.
		{name: "the raw test's size", raw: 246, writes: 2000, qps: 200, burst: 400, want: 246},
		// Filling the cache: 13,800 writes take (13,800 - 400) / 200 = 67 s at best.
		{name: "a longer run, client-bound", raw: 246, writes: 13800, qps: 200, burst: 400, want: 13800.0 / 67},
		// QPS 1000 on two cores: the API server binds, whatever the run's length.
		{name: "server-bound", raw: 290, writes: 200000, qps: 1000, burst: 2000, want: 290},
		{name: "within the burst", raw: 500, writes: 300, qps: 200, burst: 400, want: 500},
		{name: "no client limit", raw: 900, writes: 5000, qps: -1, burst: 0, want: 900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, writeLimit(tc.raw, tc.writes, tc.qps, tc.burst), 1e-9)
		})
	}
}
