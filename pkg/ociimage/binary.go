package ociimage

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// BinaryArch is the architecture, as GOARCH and an image's config name it, of the static
// Linux executable at path; or an error saying why it would not run in an image on an
// empty base, found before the image is pushed rather than when a node runs it: not a
// Linux executable (go build on a Mac without GOOS=linux), or dynamically linked (cgo: the
// image has no C library).
func BinaryArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux executable (build it with GOOS=linux): %w", path, err)
	}
	defer func() { _ = f.Close() }()
	if (f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX) || (f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN) {
		return "", fmt.Errorf("%s is not a Linux executable (%s, %s): build it with GOOS=linux", path, f.OSABI, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked, and the image has no C library: build it with CGO_ENABLED=0", path)
		}
	}
	arch, err := goarch(f.FileHeader)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return arch, nil
}

// goarch is the GOARCH of the machine an ELF header names.
func goarch(h elf.FileHeader) (string, error) {
	switch {
	case h.Machine == elf.EM_X86_64:
		return "amd64", nil
	case h.Machine == elf.EM_AARCH64:
		return "arm64", nil
	case h.Machine == elf.EM_386:
		return "386", nil
	case h.Machine == elf.EM_ARM:
		return "arm", nil
	case h.Machine == elf.EM_PPC64 && h.ByteOrder == binary.LittleEndian:
		return "ppc64le", nil
	case h.Machine == elf.EM_S390:
		return "s390x", nil
	case h.Machine == elf.EM_RISCV && h.Class == elf.ELFCLASS64:
		return "riscv64", nil
	}
	return "", fmt.Errorf("built for %s, a machine Stepwise's images are not made for", h.Machine)
}
