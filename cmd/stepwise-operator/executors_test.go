package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInstalledPluginFlagsReachTheHost: the plugins of --installed-plugin-dir are verified
// against --installed-plugin-checksums (an executable it does not list is refused, never
// run), those of --plugin-dir against their own file.
func TestInstalledPluginFlagsReachTheHost(t *testing.T) {
	script := []byte("#!/bin/sh\nexit 1\n")
	imageDir, installedDir := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(imageDir, "SHA256SUMS"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(imageDir, "stepwise-plugin-image"), script, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(installedDir, "stepwise-plugin-installed"), script, 0o755))
	installedSums := filepath.Join(t.TempDir(), "SHA256SUMS")
	require.NoError(t, os.WriteFile(installedSums, nil, 0o644))

	opts := parseFlags(t,
		"--plugin-dir="+imageDir,
		"--installed-plugin-dir="+installedDir, "--installed-plugin-checksums="+installedSums,
	)
	require.NoError(t, opts.validate())
	registry, plugins, err := loadExecutors(context.Background(), opts, nil, nil, nil)
	if plugins != nil {
		t.Cleanup(plugins.Close)
	}
	require.NoError(t, err)
	missing := registry.Missing("installed.thing").Error()
	assert.Contains(t, missing, "stepwise-plugin-installed: it is not listed in the checksum file "+installedSums)
	assert.Contains(t, missing, "stepwise-plugin-image: it is not listed in the checksum file "+filepath.Join(imageDir, "SHA256SUMS"))
}
