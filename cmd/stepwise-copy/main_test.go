package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCopy(t *testing.T) {
	src, dir := t.TempDir(), t.TempDir()
	binary, sig := filepath.Join(src, "stepwise-plugin-x"), filepath.Join(src, "stepwise-plugin-x.sigstore.json")
	require.NoError(t, os.WriteFile(binary, []byte("binary"), 0o700))
	require.NoError(t, os.WriteFile(sig, []byte("{}"), 0o600))

	require.NoError(t, run([]string{dir, binary, sig}))
	for file, want := range map[string]struct {
		data string
		mode os.FileMode
	}{"stepwise-plugin-x": {"binary", 0o555}, "stepwise-plugin-x.sigstore.json": {"{}", 0o444}} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		assert.Equal(t, want.data, string(got))
		info, err := os.Stat(filepath.Join(dir, file))
		require.NoError(t, err)
		assert.Equal(t, want.mode, info.Mode().Perm(), file)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary file left")

	for name, args := range map[string][]string{
		"no file":        {dir},
		"a missing file": {dir, filepath.Join(src, "nope")},
		"a directory":    {dir, src},
		"no directory":   {filepath.Join(src, "nope"), binary},
	} {
		assert.Error(t, run(args), name)
	}
}
