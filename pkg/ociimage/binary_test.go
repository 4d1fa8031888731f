package ociimage

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// elfFile writes the headers of a little-endian 64-bit ELF executable (no sections; one
// program header, PT_INTERP, when dynamic) and returns its path.
func elfFile(t *testing.T, machine elf.Machine, osabi elf.OSABI, typ elf.Type, dynamic bool) string {
	t.Helper()
	h := elf.Header64{
		Type: uint16(typ), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Ehsize: uint16(binary.Size(elf.Header64{})), Phentsize: uint16(binary.Size(elf.Prog64{})),
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION], h.Ident[elf.EI_OSABI] = byte(elf.EV_CURRENT), byte(osabi)
	var progs []elf.Prog64
	if dynamic {
		h.Phoff, h.Phnum = uint64(h.Ehsize), 1
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP)})
	}
	var b bytes.Buffer
	require.NoError(t, binary.Write(&b, binary.LittleEndian, h))
	for _, p := range progs {
		require.NoError(t, binary.Write(&b, binary.LittleEndian, p))
	}
	path := filepath.Join(t.TempDir(), "stepwise-plugin-acme")
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o755))
	return path
}

func TestBinaryArch(t *testing.T) {
	tests := []struct {
		name     string
		binary   func(t *testing.T) string
		wantArch string
		wantErr  string
	}{
		{name: "linux/amd64", binary: func(t *testing.T) string {
			return elfFile(t, elf.EM_X86_64, elf.ELFOSABI_NONE, elf.ET_EXEC, false)
		}, wantArch: "amd64"},
		{name: "linux/arm64", binary: func(t *testing.T) string {
			return elfFile(t, elf.EM_AARCH64, elf.ELFOSABI_LINUX, elf.ET_EXEC, false)
		}, wantArch: "arm64"},
		{name: "a static PIE", binary: func(t *testing.T) string {
			return elfFile(t, elf.EM_X86_64, elf.ELFOSABI_NONE, elf.ET_DYN, false)
		}, wantArch: "amd64"},
		{name: "cgo", binary: func(t *testing.T) string {
			return elfFile(t, elf.EM_X86_64, elf.ELFOSABI_NONE, elf.ET_EXEC, true)
		}, wantErr: "is dynamically linked, and the image has no C library: build it with CGO_ENABLED=0"},
		{name: "freebsd", binary: func(t *testing.T) string {
			return elfFile(t, elf.EM_X86_64, elf.ELFOSABI_FREEBSD, elf.ET_EXEC, false)
		}, wantErr: "is not a Linux executable (ELFOSABI_FREEBSD, ET_EXEC): build it with GOOS=linux"},
		{name: "an object file", binary: func(t *testing.T) string {
			return elfFile(t, elf.EM_X86_64, elf.ELFOSABI_NONE, elf.ET_REL, false)
		}, wantErr: "is not a Linux executable"},
		{name: "another machine", binary: func(t *testing.T) string {
			return elfFile(t, elf.EM_MIPS, elf.ELFOSABI_NONE, elf.ET_EXEC, false)
		}, wantErr: "built for EM_MIPS, a machine Stepwise's images are not made for"},
		{name: "a Mach-O binary", binary: func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "stepwise-plugin-acme")
			require.NoError(t, os.WriteFile(path, []byte("\xcf\xfa\xed\xfe\x0c\x00\x00\x01 darwin/arm64"), 0o755))
			return path
		}, wantErr: "is not a Linux executable (build it with GOOS=linux)"},
		{name: "missing", binary: func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "stepwise-plugin-acme")
		}, wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.binary(t)
			arch, err := BinaryArch(path)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				assert.ErrorContains(t, err, path, "names the binary")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantArch, arch)
		})
	}
}

// TestBinaryArchOfAGoBuild: the linker's output, this test's own binary, is read as what
// it is.
func TestBinaryArchOfAGoBuild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a Linux executable only on Linux")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	f, err := elf.Open(self)
	require.NoError(t, err)
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}
	require.NoError(t, f.Close())
	arch, err := BinaryArch(self)
	if dynamic {
		assert.ErrorContains(t, err, "CGO_ENABLED=0")
		return
	}
	require.NoError(t, err)
	assert.Equal(t, runtime.GOARCH, arch)
}
