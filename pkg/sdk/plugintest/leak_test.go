package plugintest

import (
	"encoding/base64"
	"errors"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

func TestLeakFinder(t *testing.T) {
	const (
		key     = "whsec-test-key-0123456789"
		spaced  = `p@ss w"rd/+&`
		webhook = "https://bot:hunter2pass@hooks.example.com/services/T0B1/xoxb-token?sig=q-sig-value"
	)
	tests := []struct {
		name   string
		secret string
		text   string
		want   string // what is found; empty: nothing
	}{
		{"as it is", key, "using " + key, "as it is"},
		{"a trailing newline is not part of it", key + "\n", "using " + key + " now", "as it is"},
		{"query-escaped", spaced, "u?p=" + url.QueryEscape(spaced), "URL-encoded"},
		{"path-escaped", spaced, "/x/" + url.PathEscape(spaced), "URL-encoded"},
		{"quoted", spaced, `{"p": "p@ss w\"rd/+&"}`, "quoted"},
		{"base64", key, "Basic " + base64.StdEncoding.EncodeToString([]byte(key)), "base64-encoded"},
		{"base64 for URLs, unpadded", key, base64.RawURLEncoding.EncodeToString([]byte(key)), "base64-encoded"},
		{"hex", key, "6b6579" + "7768736563" + "2d746573742d6b65792d30313233343536373839", "hex-encoded"},
		{"its first half, cut", key, "key whsec-test-k...", "its first half"},
		{"its second half", key, "...ey-0123456789", "its second half"},
		{"a URL's password", webhook, "login hunter2pass refused", "its URL's password"},
		{"a URL's path", webhook, "POST /services/T0B1/xoxb-token: 404", "its URL's path"},
		{"a URL's query value", webhook, "bad sig q-sig-value", "a value of its URL's query"},
		{"a URL's user info as basic credentials", webhook, base64.StdEncoding.EncodeToString([]byte("bot:hunter2pass")), "its URL's user info base64-encoded"},
		{"a URL's host is not a secret", webhook, "hooks.example.com did not answer", ""},
		{"a URL is not cut in halves", webhook, "https://bot:", ""},
		{"too short to tell", "abc", "abc abc", ""},
		{"nothing", key, "done", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newLeakFinder(map[string][]byte{"k": []byte(tt.secret)})
			for _, in := range []struct {
				res sdk.Result
				err error
			}{
				{res: sdk.Result{Message: tt.text}},
				{res: sdk.Result{Outputs: map[string]string{"o": tt.text}}},
				{res: sdk.Result{State: map[string]string{"s": tt.text}}},
				{err: sdk.Retryable("Busy", errors.New(tt.text))},
			} {
				found := f.find(in.res, in.err)
				if tt.want == "" {
					assert.Empty(t, found)
					continue
				}
				if assert.Len(t, found, 1) {
					assert.Contains(t, found[0], `Secret key "k", `+tt.want)
				}
			}
		})
	}
}

func TestUnreachableURL(t *testing.T) {
	got, ok := unreachableURL("https://bot:pw@hooks.example.com:8443/services/T0?sig=x\n")
	assert.True(t, ok)
	assert.Equal(t, "https://bot:pw@127.0.0.1:1/services/T0?sig=x", got)
	for _, v := range []string{"hook-creds", "ftp://host/x", "/relative", ""} {
		got, ok := unreachableURL(v)
		assert.False(t, ok, v)
		assert.Equal(t, v, got)
	}
}
