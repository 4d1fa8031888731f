package contract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"fits", "node cordoned", 64, "node cordoned"},
		{"exactly", "abcdef", 6, "abcdef"},
		{"cut with a mark", "abcdefgh", 6, "abc..."},
		{"never inside a character", "ab€€", 7, "ab..."}, // € is 3 bytes: "ab€" + "..." would be 8
		{"invalid UTF-8 made valid", "500 \xff\xfe", 64, "500 \uFFFD\uFFFD"},
		{"no room but for the mark", "abcdef", 2, ".."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.in, tt.n)
			assert.Equal(t, tt.want, got)
			assert.True(t, utf8.ValidString(got))
			assert.LessOrEqual(t, len(got), max(tt.n, len(tt.want)))
		})
	}
	long := strings.Repeat("€", 1000)
	assert.LessOrEqual(t, len(Truncate(long, 1024)), 1024)
}

type counter struct {
	Base[*Request]
	called []Hook
}

func (c *counter) Create(_ context.Context, req *Request) (Result, error) {
	c.called = append(c.called, req.Hook)
	return Wait(1, "busy"), nil
}

func TestRunHook(t *testing.T) {
	c := &counter{}
	res, err := RunHook[*Request](context.Background(), c, HookCreate, &Request{Hook: HookCreate})
	require.NoError(t, err)
	assert.Equal(t, "busy", res.Message)
	assert.Equal(t, []Hook{HookCreate}, c.called)

	res, err = RunHook[*Request](context.Background(), c, HookPostDelete, &Request{})
	require.NoError(t, err)
	assert.True(t, res.Done, "Base: done at once")

	_, err = RunHook[*Request](context.Background(), c, "Frobnicate", &Request{})
	assert.True(t, IsPermanent(err))
	assert.Equal(t, ReasonUnknownHook, OwnReason(err))
}

func TestOwnReason(t *testing.T) {
	assert.Equal(t, "CloudBusy", OwnReason(fmt.Errorf("call: %w", Retryable("CloudBusy", errors.New("x")))))
	assert.Equal(t, ReasonTimeout, OwnReason(fmt.Errorf("call: %w", context.DeadlineExceeded)))
	assert.Empty(t, OwnReason(errors.New("plain")))
	assert.False(t, IsPermanent(Retryable("CloudBusy", errors.New("x"))))
}

func TestNormalizeReason(t *testing.T) {
	tests := []struct{ in, want string }{
		{"CloudBusy", "CloudBusy"},
		{"rate limited", "RateLimited"},
		{"rate-limited: 429", "RateLimited429"},
		{"429 too many", "TooMany"},
		{"snake_case_ok", "Snake_case_ok"},
		{"Überlastet", "Berlastet"},
		{"", ReasonHookFailed},
		{"!!!", ReasonHookFailed},
		{strings.Repeat("a", 100), "A" + strings.Repeat("a", 63)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := NormalizeReason(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Regexp(t, `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, got, "what metav1.Condition accepts")
		})
	}
}

// TestHookOrder: the one list of the hooks in their order, which the CLI, plugintest and
// the tests read.
func TestHookOrder(t *testing.T) {
	assert.Equal(t, []Hook{HookPreCreate, HookCreate, HookPostCreate}, CreationHooks())
	assert.Equal(t, []Hook{HookPreDelete, HookDelete, HookPostDelete}, TeardownHooks())
	assert.Equal(t, append(CreationHooks(), TeardownHooks()...), AllHooks())

	mine := AllHooks()
	mine[0] = "Changed"
	assert.Equal(t, HookPreCreate, AllHooks()[0], "each caller gets a slice of its own")
	for _, h := range AllHooks() {
		_, err := RunHook[*Request](context.Background(), Base[*Request]{}, h, &Request{Hook: h})
		assert.NoError(t, err, "%s is a hook RunHook dispatches", h)
	}
}
