package sdk

// Buckets is the number of buckets l keeps, for the tests of package sdk_test.
func (l *TenantLimiter) Buckets() int { return l.buckets.Len() }
