package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults for the optional fields of a Step. They are applied when a step runs rather
// than written into the stored object, so changing a default later reaches every pipeline.
const (
	DefaultStepTimeout    = time.Hour
	DefaultRetryLimit     = 3
	DefaultBackoffInitial = time.Second
	DefaultBackoffFactor  = 2
	DefaultBackoffMax     = time.Minute
)

// EffectiveTimeout is the step's timeout with its default applied, at most MaxStepTimeout
// (the schema's bound, honoured for objects stored before it).
func (s *Step) EffectiveTimeout() time.Duration {
	if s.Timeout == nil || s.Timeout.Duration <= 0 {
		return DefaultStepTimeout
	}
	return min(s.Timeout.Duration, MaxStepTimeout)
}

// EffectiveRetry is the step's retry policy with every default applied.
func (s *Step) EffectiveRetry() RetryPolicy {
	out := RetryPolicy{Limit: DefaultRetryLimit}
	if s.Retry != nil {
		out.Limit = s.Retry.Limit
	}
	b := Backoff{
		Initial: &metav1.Duration{Duration: DefaultBackoffInitial},
		Factor:  DefaultBackoffFactor,
		Max:     &metav1.Duration{Duration: DefaultBackoffMax},
	}
	if s.Retry != nil && s.Retry.Backoff != nil {
		in := s.Retry.Backoff
		if in.Initial != nil && in.Initial.Duration > 0 {
			b.Initial = &metav1.Duration{Duration: min(in.Initial.Duration, MaxBackoff)}
		}
		if in.Factor > 0 {
			b.Factor = in.Factor
		}
		if in.Max != nil && in.Max.Duration > 0 {
			b.Max = &metav1.Duration{Duration: min(in.Max.Duration, MaxBackoff)}
		}
	}
	out.Backoff = &b
	return out
}

// Delay is the wait before retry number n (1 for the first retry), without jitter:
// Initial * Factor^(n-1), capped at Max.
func (b *Backoff) Delay(n int32) time.Duration {
	d := b.Initial.Duration
	for i := int32(1); i < n; i++ {
		d *= time.Duration(b.Factor)
		if d >= b.Max.Duration {
			return b.Max.Duration
		}
	}
	return min(d, b.Max.Duration)
}
