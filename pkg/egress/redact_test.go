package egress

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"https://keystone.example:5000/v3", "https://keystone.example:5000/v3"},
		{"http://admin:Sup3rS3cret@keystone.example:5000/v3", "http://keystone.example:5000/v3"},
		{"https://admin@keystone.example/v3", "https://keystone.example/v3"},
		{"https://hooks.example/terminate?token=abc123&tenant=ops", "https://hooks.example/terminate"},
		{"https://hooks.example/terminate?", "https://hooks.example/terminate"},
		{"https://hooks.example/terminate#abc123", "https://hooks.example/terminate"},
		{"https://u:p@[fd00::1]:8443/sdk?x=1", "https://[fd00::1]:8443/sdk"},
		// Malformed: everything up to the last @ and from the first ? or # goes.
		{"http://admin:pa/ss@keystone.example/v3", "http://keystone.example/v3"},
		{"http://admin:pa?ss@keystone.example/v3", "http://keystone.example/v3"},
		{"http://admin:se cret@host/v3?token=abc123", "http://host/v3"},
		{"admin:pw@host:5000/v3?token=abc123", "host:5000/v3"},
		{"", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, RedactURL(tt.raw), tt.raw)
	}
}

func TestRedactError(t *testing.T) {
	u, err := url.Parse("http://admin:Sup3rS3cret@127.0.0.1:5000/v3/auth/tokens?token=abc123")
	require.NoError(t, err)
	cause := &RefusedError{Range: "a loopback address"}
	tests := []struct {
		err  error
		want string
	}{
		{
			// As net/http reports a failed request: the password masked, the rest kept.
			err:  &url.Error{Op: "Post", URL: u.Redacted(), Err: cause},
			want: `Post "http://127.0.0.1:5000/v3/auth/tokens": ` + cause.Error(),
		},
		{
			err:  fmt.Errorf("Expected HTTP response code [201] when accessing [POST %s], but got 401 instead: %w", u, cause),
			want: "Expected HTTP response code [201] when accessing [POST http://127.0.0.1:5000/v3/auth/tokens], but got 401 instead: " + cause.Error(),
		},
		{
			err:  fmt.Errorf("get https://u:p@[::1]:8443/sdk?x=1, then %w", cause),
			want: "get https://[::1]:8443/sdk, then " + cause.Error(),
		},
		{
			// As net/url reports a URL it cannot parse: quoted as it is, spaces and all.
			err:  fmt.Errorf("secret key authURL: %w", &url.Error{Op: "parse", URL: "http://admin:pass word@keystone:5000/v3?token=abc123", Err: cause}),
			want: `secret key authURL: parse "http://keystone:5000/v3": ` + cause.Error(),
		},
	}
	for _, tt := range tests {
		got := RedactError(tt.err)
		assert.Equal(t, tt.want, got.Error())
		var refused *RefusedError
		assert.ErrorAs(t, got, &refused, "the chain is kept")
		assert.True(t, errors.Is(got, tt.err))
	}
	plain := errors.New("no URL here")
	assert.Same(t, plain, RedactError(plain))
	assert.NoError(t, RedactError(nil))
}
