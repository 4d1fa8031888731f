package host

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// verifiedCopy copies the plugin's executable into the host's private directory, hashing
// the bytes as it copies them, and returns the copy's path when they match the checksum.
// The file that runs is the file that was checked: replacing the original between the
// check and the exec, or while the plugin runs, changes nothing.
func (h *Host) verifiedCopy(p *process) (string, error) {
	dir, err := h.privateDir()
	if err != nil {
		return "", err
	}
	src, err := os.Open(p.path)
	if err != nil {
		return "", fmt.Errorf("plugin %s: %w", p.name, err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.CreateTemp(dir, p.name+"-")
	if err != nil {
		return "", fmt.Errorf("plugin %s: copying it to run: %w", p.name, err)
	}
	hash := sha256.New()
	_, copyErr := io.Copy(io.MultiWriter(dst, hash), src)
	chmodErr := dst.Chmod(0o500)
	closeErr := dst.Close()
	if err := firstErr(copyErr, chmodErr, closeErr); err != nil {
		_ = os.Remove(dst.Name())
		return "", fmt.Errorf("plugin %s: copying it to run: %w", p.name, err)
	}
	if !bytes.Equal(hash.Sum(nil), p.checksum) {
		_ = os.Remove(dst.Name())
		return "", fmt.Errorf("plugin %s: its SHA-256 does not match the checksum file", p.name)
	}
	return dst.Name(), nil
}

// privateDir is the directory, readable and writable by the operator only, that holds the
// copies plugins run from; it is made on first use and removed by Close.
func (h *Host) privateDir() (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runDir != "" {
		return h.runDir, nil
	}
	dir, err := os.MkdirTemp(h.opts.RunDir, "stepwise-plugins-")
	if err != nil {
		return "", fmt.Errorf("a private directory to run plugins from: %w", err)
	}
	h.runDir, err = filepath.Abs(dir)
	return h.runDir, err
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
