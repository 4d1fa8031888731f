package fairqueue

// This file is the one home of the rule that shares a queue's workers between tenants:
// Shares turns a worker count and a flag into a Config, and limits.allow decides, from
// that Config and what the queue holds now, whether a tenant may have one more worker.

// Shares is the Config.Share and Config.Borrow of a queue served by workers, with at most
// limit workers for one tenant while another tenant's items wait (0: no limit but the
// tenants' fair share). Borrow is all the workers but one, kept for a tenant that arrives
// while the others' items hang; with a limit of every worker, all of them.
func Shares(workers, limit int) (share, borrow int) {
	if limit > 0 {
		share = min(limit, workers)
	}
	return share, max(share, workers-1, 1)
}

// limits are a queue's Share and Borrow: see Config.
type limits struct {
	// capped bounds a tenant's share while another tenant's items wait; 0: no bound.
	capped int
	// pool is what the tenants with items waiting divide between them, and what the
	// tenants already holding workers may hold together; 0: no bound at all.
	pool int
}

// share is how many workers one tenant may hold while waiting tenants, it among them,
// have items waiting: the pool divided between them, rounded up, at least one, and never
// over the cap while it is not alone. Recomputed at each Get, it follows the tenants as
// they come and go.
func (l limits) share(waiting int) int {
	s := max(1, (l.pool+waiting-1)/max(waiting, 1))
	if waiting > 1 && l.capped > 0 {
		s = min(s, l.capped)
	}
	return s
}

// allow tells whether a tenant that holds held workers may take one more, while busy
// workers are taken in all and waiting tenants (it among them) have items waiting: it is
// under its share, and it holds none or the pool is not used up. So the last worker goes
// only to a tenant that holds none: one that arrives is served at once, whatever the
// others' items do.
func (l limits) allow(held, busy, waiting int) bool {
	if l.pool <= 0 {
		return true
	}
	return held < l.share(waiting) && (held == 0 || busy < l.pool)
}
