package host

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// pluginError is an error about one plugin, which it names: a step's failure needs the
// name, the registry's refusal (which names the plugin already) only err.
type pluginError struct {
	name string
	err  error
}

func (e *pluginError) Error() string { return "plugin " + e.name + ": " + e.err.Error() }
func (e *pluginError) Unwrap() error { return e.err }

// checksumError is why a plugin whose bytes do not match its checksum is refused. It names
// the file and both hashes, and how to list a build that is meant to run: whoever reads it
// in a failed step cannot see the operator's plugin directory.
type checksumError struct {
	// dir and name are the plugin's directory and file name, file the checksum file.
	dir, name, file string
	want, got       []byte
}

func (e *checksumError) Error() string {
	return fmt.Sprintf("its SHA-256 is %x, but the checksum file %s lists %x; "+
		"if this build is the one to run, replace its line in that file with what %q prints, then restart the operator",
		e.got, e.file, e.want, "cd "+e.dir+" && sha256sum "+e.name)
}

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
		return "", &pluginError{name: p.name, err: err}
	}
	defer func() { _ = src.Close() }()
	dst, err := os.CreateTemp(dir, p.name+"-")
	if err != nil {
		return "", &pluginError{name: p.name, err: fmt.Errorf("copying it to run: %w", err)}
	}
	hash := sha256.New()
	_, copyErr := io.Copy(io.MultiWriter(dst, hash), src)
	chmodErr := dst.Chmod(0o500)
	closeErr := dst.Close()
	if err := firstErr(copyErr, chmodErr, closeErr); err != nil {
		_ = os.Remove(dst.Name())
		return "", &pluginError{name: p.name, err: fmt.Errorf("copying it to run: %w", err)}
	}
	got := hash.Sum(nil)
	if p.checksum != nil && !bytes.Equal(got, p.checksum) {
		_ = os.Remove(dst.Name())
		return "", &pluginError{name: p.name, err: &checksumError{
			dir: filepath.Dir(p.path), name: filepath.Base(p.path), file: p.checksums, want: p.checksum, got: got,
		}}
	}
	if p.policy != nil {
		// The signature is checked against the hash of the copy that runs.
		if err := p.host.opts.Verifier.VerifyFile(*p.policy, p.path, got); err != nil {
			_ = os.Remove(dst.Name())
			return "", &pluginError{name: p.name, err: err}
		}
	}
	if p.checksum == nil && p.policy == nil {
		// start lists no such plugin; a bug must not run unchecked code.
		_ = os.Remove(dst.Name())
		return "", &pluginError{name: p.name, err: errors.New("neither a checksum nor a signature policy to verify it against")}
	}
	return dst.Name(), nil
}

// privateDirLock is the file in a private directory its host holds locked while it runs.
const privateDirLock = "lock"

// privateDir is the directory, readable and writable by the operator only, that holds the
// copies plugins run from; it is made on first use, locked while the host runs and removed
// by Close. An operator killed with SIGKILL cannot remove its own: the next host removes
// the directories whose lock no process holds.
func (h *Host) privateDir() (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runDir != "" {
		return h.runDir, nil
	}
	base := h.opts.RunDir
	if base == "" {
		base = os.TempDir()
	}
	h.removeAbandoned(base)
	dir, err := os.MkdirTemp(base, "stepwise-plugins-")
	if err != nil {
		return "", fmt.Errorf("a private directory to run plugins from: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, privateDirLock))
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("lock the private directory %s: %w", dir, err)
	}
	h.runDir, h.runLock = dir, lock
	return dir, nil
}

// removeAbandoned removes the private directories under base that no running host holds.
func (h *Host) removeAbandoned(base string) {
	dirs, err := filepath.Glob(filepath.Join(base, "stepwise-plugins-*"))
	if err != nil {
		return
	}
	for _, dir := range dirs {
		if !abandoned(filepath.Join(dir, privateDirLock)) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			h.logger.Error(err, "Removing the plugin copies of a host that is gone", "dir", dir)
			continue
		}
		h.logger.Info("Removed the plugin copies of a host that is gone", "dir", dir)
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
