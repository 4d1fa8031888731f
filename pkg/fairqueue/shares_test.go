package fairqueue

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestShares(t *testing.T) {
	tests := []struct {
		workers, limit        int
		wantShare, wantBorrow int
	}{
		{workers: 1, wantShare: 0, wantBorrow: 1},
		{workers: 2, wantShare: 0, wantBorrow: 1},
		{workers: 8, wantShare: 0, wantBorrow: 7},
		{workers: 16, wantShare: 0, wantBorrow: 15},
		{workers: 8, limit: 2, wantShare: 2, wantBorrow: 7},
		// A limit of every worker lets a namespace alone hold every one.
		{workers: 8, limit: 8, wantShare: 8, wantBorrow: 8},
		{workers: 4, limit: 9, wantShare: 4, wantBorrow: 4},
	}
	for _, tt := range tests {
		share, borrow := Shares(tt.workers, tt.limit)
		assert.Equal(t, []int{tt.wantShare, tt.wantBorrow}, []int{share, borrow}, "%d workers, limit %d", tt.workers, tt.limit)
	}
}

// TestTheShareFollowsTheTenantsWithItems: the workers but one, divided between the
// tenants with items waiting, at least one each, capped by the flag while not alone.
func TestTheShareFollowsTheTenantsWithItems(t *testing.T) {
	tests := []struct {
		workers, limit int
		// want is the share with 1, 2, 3, 4 and 20 tenants with items waiting.
		want [5]int
	}{
		{workers: 1, want: [5]int{1, 1, 1, 1, 1}},
		{workers: 2, want: [5]int{1, 1, 1, 1, 1}},
		{workers: 8, want: [5]int{7, 4, 3, 2, 1}},
		{workers: 11, want: [5]int{10, 5, 4, 3, 1}},
		{workers: 16, want: [5]int{15, 8, 5, 4, 1}},
		{workers: 16, limit: 2, want: [5]int{15, 2, 2, 2, 1}},
		{workers: 16, limit: 16, want: [5]int{16, 8, 6, 4, 1}},
	}
	for _, tt := range tests {
		share, borrow := Shares(tt.workers, tt.limit)
		l := limits{capped: share, pool: borrow}
		var got [5]int
		for i, n := range []int{1, 2, 3, 4, 20} {
			got[i] = l.share(n)
		}
		assert.Equal(t, tt.want, got, "%d workers, limit %d", tt.workers, tt.limit)
	}
}
