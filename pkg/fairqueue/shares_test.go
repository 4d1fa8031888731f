package fairqueue

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestShares(t *testing.T) {
	tests := []struct {
		workers, share        int
		wantShare, wantBorrow int
	}{
		{workers: 1, wantShare: 1, wantBorrow: 1},
		{workers: 2, wantShare: 1, wantBorrow: 1},
		{workers: 8, wantShare: 4, wantBorrow: 7},
		{workers: 8, share: 2, wantShare: 2, wantBorrow: 7},
		{workers: 4, share: 9, wantShare: 4, wantBorrow: 4},
	}
	for _, tt := range tests {
		share, borrow := Shares(tt.workers, tt.share)
		assert.Equal(t, []int{tt.wantShare, tt.wantBorrow}, []int{share, borrow}, "%d workers, share %d", tt.workers, tt.share)
	}
}
