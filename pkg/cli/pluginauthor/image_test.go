package pluginauthor_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/cli"
	"github.com/stepwise-dev/stepwise/pkg/ociimage"
)

// staticBinary writes, as dir/name, what plugin image takes for a static Linux executable
// of machine: an ELF header (no program to run; pkg/ociimage's tests check a real build).
func staticBinary(t *testing.T, dir, name string, machine elf.Machine) string {
	t.Helper()
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Ehsize: uint16(binary.Size(elf.Header64{}))}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var b bytes.Buffer
	require.NoError(t, binary.Write(&b, binary.LittleEndian, h))
	b.WriteString(name) // two plugins, two binaries
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o755))
	return path
}

// assertImage asserts that archive, which plugin image wrote and printed as printed, is
// the image pkg/ociimage builds of binary (its signature included when there is one) for
// linux/arch, byte for byte.
func assertImage(t *testing.T, binary, arch, tag, archive, printed string) {
	t.Helper()
	want := filepath.Join(t.TempDir(), "want.tar")
	digest, err := ociimage.WriteArchive(ociimage.PluginSpec(binary), arch, tag, want)
	require.NoError(t, err)
	assert.Equal(t, archive+" "+tag+" "+digest.String()+"\n", printed, "hack/image's line: the archive, the tag, the digest")
	got, err := os.ReadFile(archive)
	require.NoError(t, err)
	wantData, err := os.ReadFile(want)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(wantData, got), "%s is the plugin's image for linux/%s", archive, arch)
}

// TestPluginImageSigned builds a plugin's image as the scaffold's README does: signed
// first, the signature in the image, checked as the operator does.
func TestPluginImageSigned(t *testing.T) {
	keys, work := t.TempDir(), t.TempDir()
	code, _, errOut := runPlugin(t, "keygen", "--dir", keys)
	require.Equal(t, cli.ExitOK, code, errOut)
	bin := staticBinary(t, work, "stepwise-plugin-acme", elf.EM_X86_64)
	archive := filepath.Join(work, "images", "stepwise-plugin-acme.tar")

	code, out, errOut := runPlugin(t, "image", bin, "--signing-key", filepath.Join(keys, "stepwise-signing.key"),
		"--tag", "registry.example/stepwise-plugin-acme:v1", "-o", archive, "--arch", "amd64")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Empty(t, errOut)
	require.FileExists(t, bin+".sigstore.json", "signed first")
	assertImage(t, bin, "amd64", "registry.example/stepwise-plugin-acme:v1", archive, out)

	code, _, errOut = runPlugin(t, "verify", bin, "--key", filepath.Join(keys, "stepwise-signing.pub"))
	assert.Equal(t, cli.ExitOK, code, errOut)
}

// TestPluginImageOfTheBinarysArchitecture: without --arch the image is for the binary's
// architecture; unsigned, it is built with a warning on standard error.
func TestPluginImageOfTheBinarysArchitecture(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	bin := staticBinary(t, work, "stepwise-plugin-acme", elf.EM_AARCH64)
	code, out, errOut := runPlugin(t, "image", bin, "--tag", "stepwise-plugin-acme:dev", "-o", "acme.tar")
	require.Equal(t, cli.ExitOK, code, errOut)
	assertImage(t, bin, "arm64", "stepwise-plugin-acme:dev", "acme.tar", out)
	assert.Contains(t, errOut, "warning: "+bin+" has no signature")
	assert.NoFileExists(t, bin+".sigstore.json")
}

// TestPluginImageRefuses: what would make an image no node runs, or no image at all, is
// said before anything is signed or written.
func TestPluginImageRefuses(t *testing.T) {
	tests := []struct {
		name    string
		binary  func(t *testing.T, dir string) string
		args    []string
		wantErr string
	}{
		{name: "another architecture than --arch", args: []string{"--arch", "arm64"},
			wantErr: "is built for linux/amd64, not linux/arm64: build it with GOOS=linux GOARCH=arm64"},
		{name: "an architecture nodes are not", args: []string{"--arch", "386"}, wantErr: `--arch "386": Stepwise's images are for amd64 or arm64`},
		{name: "a binary of another machine", binary: func(t *testing.T, dir string) string {
			return staticBinary(t, dir, "stepwise-plugin-acme", elf.EM_386)
		}, wantErr: "is built for linux/386: Stepwise's images are for amd64 or arm64"},
		{name: "a binary for macOS", binary: func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "stepwise-plugin-acme")
			require.NoError(t, os.WriteFile(path, []byte("\xcf\xfa\xed\xfe\x0c\x00\x00\x01 darwin/arm64"), 0o755))
			return path
		}, wantErr: "is not a Linux executable (build it with GOOS=linux)"},
		{name: "not a plugin's name", binary: func(t *testing.T, dir string) string {
			return staticBinary(t, dir, "acme", elf.EM_X86_64)
		}, wantErr: "a plugin binary is named stepwise-plugin-NAME"},
		{name: "no tag", args: []string{"--tag", "localhost:5000/stepwise-plugin-acme"}, wantErr: "give NAME:TAG"},
		{name: "a digest", args: []string{"--tag", "stepwise-plugin-acme@sha256:0123"}, wantErr: "give NAME:TAG"},
		{name: "no signing key", args: []string{"--signing-key", "missing.key"}, wantErr: "read the signing key"},
		{name: "no binary", binary: func(t *testing.T, dir string) string {
			return filepath.Join(dir, "stepwise-plugin-acme")
		}, wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			bin := filepath.Join(dir, "stepwise-plugin-acme")
			if tt.binary != nil {
				bin = tt.binary(t, dir)
			} else {
				staticBinary(t, dir, "stepwise-plugin-acme", elf.EM_X86_64)
			}
			args := append([]string{"image", bin, "--tag", "stepwise-plugin-acme:dev", "-o", "acme.tar"}, tt.args...)
			code, out, errOut := runPlugin(t, args...)
			assert.Equal(t, cli.ExitError, code)
			assert.Contains(t, errOut, tt.wantErr)
			assert.Empty(t, out)
			assert.NoFileExists(t, "acme.tar")
			assert.NoFileExists(t, bin+".sigstore.json")
		})
	}

	t.Run("flags", func(t *testing.T) {
		for _, args := range [][]string{
			{"image", "stepwise-plugin-acme", "-o", "acme.tar"},
			{"image", "stepwise-plugin-acme", "--tag", "stepwise-plugin-acme:dev"},
			{"image", "--tag", "stepwise-plugin-acme:dev", "-o", "acme.tar"},
		} {
			code, _, _ := runPlugin(t, args...)
			assert.Equal(t, cli.ExitError, code, "%v", args)
		}
	})
}
