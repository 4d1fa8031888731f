package sdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

func TestInstallArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantDir string
		wantOK  bool
	}{
		{name: "install and a directory", args: []string{"install", "/plugins"}, wantDir: "/plugins", wantOK: true},
		{name: "a relative directory", args: []string{"install", "out"}, wantDir: "out", wantOK: true},
		{name: "an empty directory, refused by install", args: []string{"install", ""}, wantDir: "", wantOK: true},
		{name: "no arguments: the operator starts it so", args: nil},
		{name: "install alone", args: []string{"install"}},
		{name: "one argument more", args: []string{"install", "/plugins", "extra"}},
		{name: "another word", args: []string{"copy", "/plugins"}},
		{name: "a flag", args: []string{"--install", "/plugins"}},
		{name: "install in capitals", args: []string{"INSTALL", "/plugins"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, ok := installArgs(tt.args)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.wantDir, dir)
		})
	}
}

// writeExe writes a fake plugin executable named name with the given contents, in a
// directory of its own, and returns its path.
func writeExe(t *testing.T, name, contents string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(contents), 0o755))
	return path
}

// fileNames are the names of the entries of dir.
func fileNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func TestInstall(t *testing.T) {
	const name = "stepwise-plugin-fake"
	contents := "#!/bin/false\nthe plugin's bytes\x00\x01\x02"
	tests := []struct {
		name string
		// existing is the contents of a file already under the plugin's name, if not empty.
		existing string
	}{
		{name: "into an empty directory"},
		{name: "over an older copy", existing: "an older build"},
		{name: "over a larger older copy", existing: contents + contents + "more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exe := writeExe(t, name, contents)
			dir := t.TempDir()
			dst := filepath.Join(dir, name)
			var old *os.File
			if tt.existing != "" {
				require.NoError(t, os.WriteFile(dst, []byte(tt.existing), 0o600))
				// Held open: a copy written in place would change what it reads.
				var err error
				old, err = os.Open(dst)
				require.NoError(t, err)
				t.Cleanup(func() { _ = old.Close() })
			}

			var out bytes.Buffer
			require.NoError(t, install(exe, dir, &out))

			got, err := os.ReadFile(dst)
			require.NoError(t, err)
			assert.Equal(t, contents, string(got))
			info, err := os.Stat(dst)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o755), info.Mode().Perm())
			assert.True(t, info.Mode().IsRegular())
			assert.Equal(t, "installed "+name+" (sha256 "+sha256Hex([]byte(contents))+") into "+dir+"\n", out.String())
			assert.Equal(t, []string{name}, fileNames(t, dir), "no temporary file left")

			if old != nil {
				// Replaced by a rename: the file that was there is another, whole, file.
				oldInfo, err := old.Stat()
				require.NoError(t, err)
				assert.False(t, os.SameFile(oldInfo, info), "the new copy is a new file, renamed over the old")
				oldData, err := io.ReadAll(old)
				require.NoError(t, err)
				assert.Equal(t, tt.existing, string(oldData), "the old file was never written to")
			}
		})
	}
}

// TestInstallCopiesTheSignatureToo: a plugin image carries its signature next to its
// executable; the operator verifies the copy against it, so install copies both.
func TestInstallCopiesTheSignatureToo(t *testing.T) {
	const name = "stepwise-plugin-fake"
	exe := writeExe(t, name, "the plugin's bytes")
	require.NoError(t, os.WriteFile(layout.SignaturePath(exe), []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`), 0o600))
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, install(exe, dir, &out))

	assert.Equal(t, []string{name, name + layout.SignatureSuffix}, fileNames(t, dir))
	sig, err := os.ReadFile(layout.SignaturePath(filepath.Join(dir, name)))
	require.NoError(t, err)
	assert.Contains(t, string(sig), "sigstore.bundle")
	info, err := os.Stat(layout.SignaturePath(filepath.Join(dir, name)))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), "the operator reads it, nobody runs it")
	assert.Equal(t, "installed "+name+" (sha256 "+sha256Hex([]byte("the plugin's bytes"))+") into "+dir+", with its signature\n", out.String())
}

func TestInstallFails(t *testing.T) {
	const name = "stepwise-plugin-fake"
	tests := []struct {
		name string
		// setup returns the executable and the directory to install into.
		setup   func(t *testing.T) (exe, dir string)
		wantErr string
	}{
		{name: "a missing directory", setup: func(t *testing.T) (string, string) {
			return writeExe(t, name, "bytes"), filepath.Join(t.TempDir(), "missing")
		}, wantErr: "install into "},
		{name: "no directory", setup: func(t *testing.T) (string, string) {
			return writeExe(t, name, "bytes"), ""
		}, wantErr: "no directory to install into"},
		{name: "a directory that is a file", setup: func(t *testing.T) (string, string) {
			file := filepath.Join(t.TempDir(), "file")
			require.NoError(t, os.WriteFile(file, nil, 0o644))
			return writeExe(t, name, "bytes"), file
		}, wantErr: "install into "},
		{name: "a missing executable", setup: func(t *testing.T) (string, string) {
			return filepath.Join(t.TempDir(), name), t.TempDir()
		}, wantErr: "read this executable"},
		{name: "a directory under the plugin's name", setup: func(t *testing.T) (string, string) {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name, "keep"), nil, 0o644))
			return writeExe(t, name, "bytes"), dir
		}, wantErr: "install " + name + " into "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exe, dir := tt.setup(t)
			var before []string
			if info, err := os.Stat(dir); err == nil && info.IsDir() {
				before = fileNames(t, dir)
			}
			var out bytes.Buffer
			err := install(exe, dir, &out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Empty(t, out.String(), "nothing printed to standard output")
			if before != nil {
				assert.Equal(t, before, fileNames(t, dir), "nothing left in the directory")
			}
		})
	}
}

// TestInstallModeOfABuiltPlugin builds plugins/example and runs it as an init container
// runs a plugin's image: `stepwise-plugin-example install DIR`.
func TestInstallModeOfABuiltPlugin(t *testing.T) {
	const name = "stepwise-plugin-example"
	bin := filepath.Join(t.TempDir(), name)
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./plugins/example")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	src, err := os.ReadFile(bin)
	require.NoError(t, err)
	// Started through a symbolic link of another name, it installs itself under its own.
	link := filepath.Join(t.TempDir(), "plugin")
	require.NoError(t, os.Symlink(bin, link))

	tests := []struct {
		name string
		exe  string
	}{
		{name: "by its path", exe: bin},
		{name: "through a symbolic link", exe: link},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(t.Context(), tt.exe, "install", dir)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Env = []string{} // as an init container's: nothing of go-plugin's
			require.NoError(t, cmd.Run(), "stderr:\n%s", stderr.String())

			got, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			assert.Equal(t, sha256Hex(src), sha256Hex(got), "the copy is the binary")
			assert.Equal(t, "installed "+name+" (sha256 "+sha256Hex(src)+") into "+dir+"\n", stdout.String())
			assert.Empty(t, stderr.String())
			assert.Equal(t, []string{name}, fileNames(t, dir))
		})
	}

	t.Run("an error exits 1", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(t.Context(), bin, "install", filepath.Join(t.TempDir(), "missing"))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Env = []string{}
		var exit *exec.ExitError
		require.ErrorAs(t, cmd.Run(), &exit)
		assert.Equal(t, 1, exit.ExitCode())
		assert.Contains(t, stderr.String(), "stepwise plugin install: install into ")
		assert.Empty(t, stdout.String())
	})

	t.Run("other arguments are go-plugin's", func(t *testing.T) {
		// Not started by the operator (no handshake cookie): go-plugin says so and exits 1.
		var stderr bytes.Buffer
		cmd := exec.CommandContext(t.Context(), bin, "install")
		cmd.Stderr = &stderr
		cmd.Env = []string{}
		var exit *exec.ExitError
		require.ErrorAs(t, cmd.Run(), &exit)
		assert.Equal(t, 1, exit.ExitCode())
		assert.Contains(t, stderr.String(), "This binary is a plugin")
	})
}
