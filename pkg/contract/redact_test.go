package contract

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactorString(t *testing.T) {
	r := NewRedactor(
		map[string][]byte{"password": []byte("Sup3rS3cret"), "short": []byte("abc")},
		map[string][]byte{"url": []byte("https://bot:pa55w0rd@hooks.example.com/services/T01/B02/xyzzy?token=t0k3n-v4lue&x=1\n")},
	)
	tests := []struct{ in, want string }{
		{in: "login failed for Sup3rS3cret", want: "login failed for [redacted]"},
		{in: "abc is too short to be a credential", want: "abc is too short to be a credential"},
		{in: `Post "https://bot:pa55w0rd@hooks.example.com/services/T01/B02/xyzzy?token=t0k3n-v4lue&x=1": dial tcp`,
			want: `Post "[redacted]": dial tcp`},
		{in: `Post "https://bot:xxxxx@hooks.example.com/services/T01/B02/xyzzy?token=t0k3n-v4lue&x=1": EOF`,
			want: `Post "[redacted]": EOF`},
		{in: "token t0k3n-v4lue expired", want: "token [redacted] expired"},
		{in: "pa55w0rd", want: "[redacted]"},
		{in: "no path /services/T01/B02/xyzzy here", want: "no path [redacted] here"},
		{in: "escaped Sup3rS3cret%21", want: "escaped [redacted]%21"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, r.String(tt.in), tt.in)
	}
}

// TestRedactorRemovesASecretURLFromNetHTTPError: the error net/http returns for a URL kept
// in a Secret, as a hook would return it unchanged, holds no part of the secret once
// redacted.
func TestRedactorRemovesASecretURLFromNetHTTPError(t *testing.T) {
	secret := "http://127.0.0.1:1/hooks/T0ps3cr3tP4th?token=s3cr3t-t0k3n"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, secret, nil)
	require.NoError(t, err)
	_, callErr := http.DefaultClient.Do(req)
	require.Error(t, callErr)
	require.Contains(t, callErr.Error(), "s3cr3t-t0k3n", "net/http quotes the URL")

	r := NewRedactor(map[string][]byte{"url": []byte(secret)})
	got := r.Error(Permanent("NotifyFailed", fmt.Errorf("notify: %w", callErr)))
	for _, part := range []string{secret, "T0ps3cr3tP4th", "s3cr3t-t0k3n", "/hooks/T0ps3cr3tP4th"} {
		assert.NotContains(t, got.Error(), part)
	}
	assert.True(t, IsPermanent(got))
	assert.Equal(t, "NotifyFailed", OwnReason(got))
}

func TestRedactorResultAndError(t *testing.T) {
	r := NewRedactor(map[string][]byte{"token": []byte("hunter22")})
	res := r.Result(Result{
		Message: "sent with hunter22", Outputs: map[string]string{"echo": "hunter22", "hunter22": "key"},
		State:     map[string]string{"token": "hunter22"},
		BlockedBy: []Blocker{{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "hunter22"}},
	})
	assert.Equal(t, "sent with [redacted]", res.Message)
	assert.Equal(t, map[string]string{"echo": "[redacted]", "[redacted]": "key"}, res.Outputs)
	assert.Equal(t, map[string]string{"token": "[redacted]"}, res.State)
	assert.Equal(t, []Blocker{{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "[redacted]"}}, res.BlockedBy)

	plain := errors.New("no secret here")
	assert.Same(t, plain, r.Error(plain), "an error without a secret is kept as it is")
	assert.Equal(t, "bad [redacted]", r.Error(errors.New("bad hunter22")).Error())
	retry := r.Error(Retryable("RateLimited", errors.New("hunter22 throttled")))
	assert.False(t, IsPermanent(retry))
	assert.Equal(t, "RateLimited", OwnReason(retry))
	assert.True(t, NewRedactor().Empty())
	assert.False(t, strings.Contains(r.String("hunter22hunter22"), "hunter"))
}
