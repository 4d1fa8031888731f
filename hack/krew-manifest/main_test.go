package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The template of the repository, from this package's directory.
var template = filepath.Join("..", "..", "deploy", "krew", "stepwise.yaml")

// plugin is what the test reads of a krew manifest.
type plugin struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Version          string `yaml:"version"`
		Homepage         string `yaml:"homepage"`
		ShortDescription string `yaml:"shortDescription"`
		Description      string `yaml:"description"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			URI    string `yaml:"uri"`
			SHA256 string `yaml:"sha256"`
			Bin    string `yaml:"bin"`
			Files  []struct {
				From string `yaml:"from"`
				To   string `yaml:"to"`
			} `yaml:"files"`
		} `yaml:"platforms"`
	} `yaml:"spec"`
}

var platforms = [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// writeArchive writes DIR/kubectl-stepwise_TAG_OS_ARCH.tar.gz holding files (name: mode),
// each file's content naming the platform so that every archive differs, and returns its
// SHA-256.
func writeArchive(t *testing.T, dir, tag, goos, goarch string, files map[string]int64) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, mode := range files {
		body := []byte(fmt.Sprintf("#!/bin/sh\necho kubectl-stepwise %s %s/%s\n", tag, goos, goarch))
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write(body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	name := fmt.Sprintf("kubectl-stepwise_%s_%s_%s.tar.gz", tag, goos, goarch)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644))
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// generate runs krew-manifest with args and returns its exit code, stdout and stderr.
func generate(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestManifest(t *testing.T) {
	const tag = "v0.3.0"
	dist := t.TempDir()
	want := map[string]string{} // os/arch: sha256
	for _, p := range platforms {
		want[p[0]+"/"+p[1]] = writeArchive(t, dist, tag, p[0], p[1], map[string]int64{"kubectl-stepwise": 0o755})
	}
	// Another release's archive is not read.
	writeArchive(t, dist, "v0.2.0", "linux", "amd64", map[string]int64{"kubectl-stepwise": 0o755})

	code, out, errOut := generate("-version", tag, "-dist", dist, "-template", template, "-all")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.NotContains(t, out, "{{")

	var m plugin
	require.NoError(t, yaml.Unmarshal([]byte(out), &m), out)
	assert.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", m.APIVersion)
	assert.Equal(t, "Plugin", m.Kind)
	assert.Equal(t, "stepwise", m.Metadata.Name)
	assert.Equal(t, tag, m.Spec.Version)
	assert.Equal(t, "https://github.com/stepwise-dev/stepwise", m.Spec.Homepage)
	assert.NotEmpty(t, m.Spec.ShortDescription)
	assert.NotEmpty(t, m.Spec.Description)

	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		goos, goarch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		require.NotEmpty(t, goos, "a selector with os")
		require.NotEmpty(t, goarch, "a selector with arch")
		key := goos + "/" + goarch
		assert.False(t, seen[key], "%s twice", key)
		seen[key] = true
		assert.Equal(t, fmt.Sprintf("https://github.com/stepwise-dev/stepwise/releases/download/%[1]s/kubectl-stepwise_%[1]s_%s_%s.tar.gz", tag, goos, goarch), p.URI)
		assert.Regexp(t, hex64, p.SHA256, key)
		assert.Equal(t, want[key], p.SHA256, "%s: the SHA-256 of its archive", key)
		assert.Equal(t, "kubectl-stepwise", p.Bin, key)
		require.Len(t, p.Files, 1, key)
		assert.Equal(t, "kubectl-stepwise", p.Files[0].From, key)
		assert.Equal(t, ".", p.Files[0].To, key)
	}
	assert.Len(t, seen, len(platforms), "linux and darwin, amd64 and arm64")
}

func TestManifestMissingArchives(t *testing.T) {
	const tag = "v0.3.0"
	dist := t.TempDir()
	sum := writeArchive(t, dist, tag, "linux", "amd64", map[string]int64{"./kubectl-stepwise": 0o755})

	// As make krew-manifest runs it: the host's platform only, the others left out.
	code, out, errOut := generate("-version", tag, "-dist", dist, "-template", template)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "darwin/arm64 left out")
	var m plugin
	require.NoError(t, yaml.Unmarshal([]byte(out), &m), out)
	require.Len(t, m.Spec.Platforms, 1)
	assert.Equal(t, map[string]string{"os": "linux", "arch": "amd64"}, m.Spec.Platforms[0].Selector.MatchLabels)
	assert.Equal(t, sum, m.Spec.Platforms[0].SHA256)

	// For a release, every platform.
	code, out, errOut = generate("-version", tag, "-dist", dist, "-template", template, "-all")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "kubectl-stepwise_v0.3.0_linux_arm64.tar.gz")

	// None at all.
	code, out, errOut = generate("-version", "v9.9.9", "-dist", dist, "-template", template)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "no archive of any platform")
}

func TestManifestBadArchives(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]int64
		wantErr string
	}{
		{name: "no bin", files: map[string]int64{"README.md": 0o644}, wantErr: "no kubectl-stepwise in it"},
		{name: "bin in a directory", files: map[string]int64{"bin/kubectl-stepwise": 0o755}, wantErr: "no kubectl-stepwise in it"},
		{name: "bin not executable", files: map[string]int64{"kubectl-stepwise": 0o644}, wantErr: "kubectl-stepwise is not an executable file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dist := t.TempDir()
			writeArchive(t, dist, "v0.3.0", "linux", "amd64", tt.files)
			code, out, errOut := generate("-version", "v0.3.0", "-dist", dist, "-template", template)
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tt.wantErr)
		})
	}
	t.Run("not gzip", func(t *testing.T) {
		dist := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dist, "kubectl-stepwise_v0.3.0_linux_amd64.tar.gz"), []byte("not an archive"), 0o644))
		code, _, errOut := generate("-version", "v0.3.0", "-dist", dist, "-template", template)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "gzip")
	})
}

func TestManifestTemplateMistakes(t *testing.T) {
	good, err := os.ReadFile(template)
	require.NoError(t, err)
	tests := []struct {
		name     string
		template string
		wantErr  string
	}{
		{
			name:     "a uri that names another platform's archive",
			template: string(bytes.Replace(good, []byte("_{{TAG}}_linux_amd64.tar.gz"), []byte("_{{TAG}}_linux_arm64.tar.gz"), 1)),
			wantErr:  "the uri names kubectl-stepwise_v0.3.0_linux_arm64.tar.gz, not kubectl-stepwise_v0.3.0_linux_amd64.tar.gz",
		},
		{
			name:     "a sha256 already there",
			template: string(bytes.Replace(good, []byte(`"{{SHA256}}"`), []byte(`"0000"`), 1)),
			wantErr:  `sha256 is "0000"`,
		},
		{name: "no platforms", template: "apiVersion: v1\nkind: Plugin\nspec: {}\n", wantErr: "no spec.platforms"},
		{name: "not YAML", template: "spec: [", wantErr: "template:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dist := t.TempDir()
			for _, p := range platforms {
				writeArchive(t, dist, "v0.3.0", p[0], p[1], map[string]int64{"kubectl-stepwise": 0o755})
			}
			file := filepath.Join(t.TempDir(), "stepwise.yaml")
			require.NoError(t, os.WriteFile(file, []byte(tt.template), 0o644))
			code, out, errOut := generate("-version", "v0.3.0", "-dist", dist, "-template", file)
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tt.wantErr)
		})
	}
}

func TestFlags(t *testing.T) {
	code, out, errOut := generate("-dist", t.TempDir(), "-template", template)
	assert.Equal(t, 2, code, "-version is required")
	assert.Empty(t, out)
	assert.Contains(t, errOut, "usage:")

	code, _, _ = generate("-version", "v0.3.0", "extra")
	assert.Equal(t, 2, code)

	code, _, errOut = generate("-version", "../v0.3.0", "-dist", t.TempDir(), "-template", template)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not a tag")

	// A version krew would refuse is written, with a warning: git describe's output on a
	// branch, as make krew-manifest passes it.
	dist := t.TempDir()
	writeArchive(t, dist, "v0.3.0-2-gabc1234-dirty", "linux", "amd64", map[string]int64{"kubectl-stepwise": 0o755})
	code, _, errOut = generate("-version", "v0.3.0-2-gabc1234-dirty", "-dist", dist, "-template", template)
	assert.Equal(t, 0, code, errOut)
	assert.NotContains(t, errOut, "warning", "a semver pre-release")
	writeArchive(t, dist, "1a2b3c4", "linux", "amd64", map[string]int64{"kubectl-stepwise": 0o755})
	code, _, errOut = generate("-version", "1a2b3c4", "-dist", dist, "-template", template)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, `warning: krew wants a version such as v1.2.3, not "1a2b3c4"`)
}
