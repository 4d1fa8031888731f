package sdk

// Buckets is the number of buckets l keeps, for the tests of package sdk_test.
func (l *TenantLimiter) Buckets() int { return l.buckets.Len() }

// Waiting is the number of namespace's requests waiting for a token of the plugin's
// bucket, for the tests of package sdk_test.
func (l *TenantLimiter) Waiting(namespace string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting[namespace]
}
