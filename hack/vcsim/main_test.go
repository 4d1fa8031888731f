package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const demoUUID = "4210f0a4-5d2e-4b7c-9a3e-6c1d2b8e7f01"

// startServe runs `vcsim serve` until the test ends and waits for its ready file.
func startServe(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, []string{"--dir", dir, "--vm", "demo-worker-1=" + demoUUID}) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, fileReady))
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "serve never wrote %s", fileReady)
}

func TestServeNamesTheVMAndVMsListsIt(t *testing.T) {
	dir := t.TempDir()
	startServe(t, dir)

	for _, name := range []string{fileURL, fileUsername, filePassword, fileCA} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s holds part of the login", name)
		assert.NotZero(t, fi.Size(), name)
	}
	var out bytes.Buffer
	require.NoError(t, listVMs(t.Context(), &out, []string{"--dir", dir}))
	assert.Regexp(t, `(?m)^demo-worker-1\s+`+demoUUID+`\s+poweredOn$`, out.String())
}

func TestVMsRefusesAWrongPassword(t *testing.T) {
	dir := t.TempDir()
	startServe(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, filePassword), []byte("not-the-password"), 0o600))

	err := listVMs(t.Context(), new(bytes.Buffer), []string{"--dir", dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "log in")
	assert.NotContains(t, err.Error(), "not-the-password")
}

func TestVMsSaysWhenNoSimulatorRuns(t *testing.T) {
	err := listVMs(t.Context(), new(bytes.Buffer), []string{"--dir", t.TempDir()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is the simulator running")
}
