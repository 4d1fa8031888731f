package cli

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenPutsNoTokenOnACommandLine: --open gave xdg-open the URL with the token, which any
// local user reads in /proc/PID/cmdline. The opener now gets a file only the user can
// read, which redirects to the URL.
func TestOpenPutsNoTokenOnACommandLine(t *testing.T) {
	const token = "s3cret-dashboard-token-0123456789"
	url := "http://127.0.0.1:8089/?token=" + token
	var arg string
	remove, err := openDashboard(context.Background(), url, func(_ context.Context, a string) error {
		arg = a
		return nil
	})
	require.NoError(t, err)
	assert.NotContains(t, arg, token, "the opener's argument carries the token")
	info, err := os.Stat(arg)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "only the user may read the page")
	page, err := os.ReadFile(arg)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(page), `http-equiv="refresh" content="0;url=http://127.0.0.1:8089/?token=`+token+`"`), "the page redirects to the dashboard: %s", page)
	remove()
	_, err = os.Stat(arg)
	assert.True(t, os.IsNotExist(err), "the page is removed when the dashboard stops")
}
