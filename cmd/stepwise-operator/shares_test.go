package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWorkerShares(t *testing.T) {
	tests := []struct {
		name                  string
		args                  []string
		wantShare, wantBorrow int
		wantErr               string
	}{
		{name: "defaults: no cap, all but one shared between the namespaces with work", wantShare: 0, wantBorrow: 7},
		{name: "one worker", args: []string{"--workers=1"}, wantShare: 0, wantBorrow: 1},
		{name: "three workers", args: []string{"--workers=3"}, wantShare: 0, wantBorrow: 2},
		{name: "sixteen workers", args: []string{"--workers=16"}, wantShare: 0, wantBorrow: 15},
		{name: "a cap set", args: []string{"--workers=16", "--max-workers-per-namespace=2"}, wantShare: 2, wantBorrow: 15},
		{name: "a cap of every worker", args: []string{"--workers=8", "--max-workers-per-namespace=8"}, wantShare: 8, wantBorrow: 8},
		{name: "a cap over the workers", args: []string{"--workers=4", "--max-workers-per-namespace=10"}, wantShare: 4, wantBorrow: 4},
		{name: "negative", args: []string{"--max-workers-per-namespace=-1"}, wantErr: "--max-workers-per-namespace must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := parseFlags(t, tt.args...)
			if !validates(t, opts, tt.wantErr) {
				return
			}
			share, borrow := opts.workerShares()
			assert.Equal(t, tt.wantShare, share)
			assert.Equal(t, tt.wantBorrow, borrow)
		})
	}
}
