package fairqueue

// Shares is the Share and Borrow of a queue served by workers: share, when not 0, else
// half the workers (at least one), and never more than the workers; Borrow leaves one
// worker free for a tenant that arrives while another's items hang (when there are two).
func Shares(workers, share int) (int, int) {
	if share == 0 {
		share = max(1, workers/2)
	}
	share = min(share, workers)
	return share, max(share, workers-1)
}
