package sdk

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// installCommand is the argument that starts a plugin in install mode:
//
//	stepwise-plugin-NAME install DIR
//
// A plugin shipped as its own image holds its binary alone (no shell, no cp), which is the
// image's entrypoint: run with these arguments, it copies itself out (by hand; the chart
// copies it with the operator's stepwise-copy instead, running nothing of the plugin).
const installCommand = "install"

// installArgs says whether args, the process's arguments after its name (os.Args[1:]),
// ask for install mode, and into which directory: exactly "install" and the directory.
// Any other arguments leave the plugin to serve as always.
func installArgs(args []string) (dir string, ok bool) {
	if len(args) != 2 || args[0] != installCommand {
		return "", false
	}
	return args[1], true
}

// installSelf is install mode: it copies the running executable into dir, writes what
// install printed to out or the error to errOut, and returns the process's exit code.
func installSelf(dir string, out, errOut io.Writer) int {
	err := func() error {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this executable: %w", err)
		}
		if exe, err = filepath.EvalSymlinks(exe); err != nil {
			return fmt.Errorf("find this executable: %w", err)
		}
		return install(exe, dir, out)
	}()
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "stepwise plugin install: %v\n", err)
		return 1
	}
	return 0
}

// install copies the file exe to dir under its base name, mode 0755, with its signature
// when one is next to it (layout.SignaturePath), and prints one line, "installed NAME
// (sha256 HEX) into DIR", HEX the SHA-256 of the bytes copied, and ", with its signature".
// Each copy is written to a temporary file in dir (whose name does not start with the
// plugins' prefix, so the operator never loads it) and renamed over its name once complete
// and synced: a reader of dir sees the previous file or the whole new one, never a part.
// On error nothing is left in dir and an existing NAME is untouched.
func install(exe, dir string, out io.Writer) error {
	if dir == "" {
		return errors.New("no directory to install into")
	}
	name := filepath.Base(exe)
	signed := ""
	sig := layout.SignaturePath(exe)
	if _, err := os.Stat(sig); err == nil {
		if _, err := copyInto(sig, "its signature", dir, 0o644); err != nil {
			return err
		}
		signed = ", with its signature"
	}
	sum, err := copyInto(exe, "this executable", dir, 0o755)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "installed %s (sha256 %s) into %s%s\n", name, hex.EncodeToString(sum), dir, signed)
	return err
}

// copyInto copies the regular file path (what, for errors) into dir under its base name
// with mode, through a temporary file renamed once synced, and returns the SHA-256 of the
// bytes copied.
func copyInto(path, what, dir string, mode os.FileMode) ([]byte, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer func() { _ = src.Close() }()
	info, err := src.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %s is not a regular file", what, path)
	}
	name := filepath.Base(path)
	tmp, err := os.CreateTemp(dir, "."+name+".install-*")
	if err != nil {
		return nil, fmt.Errorf("install into %s: %w", dir, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	sum := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, sum), src); err != nil {
		return nil, fmt.Errorf("copy %s into %s: %w", name, dir, err)
	}
	// Chmod, not the creation mode: the umask does not narrow it.
	if err := tmp.Chmod(mode); err != nil {
		return nil, fmt.Errorf("copy %s into %s: %w", name, dir, err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("copy %s into %s: %w", name, dir, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("copy %s into %s: %w", name, dir, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return nil, fmt.Errorf("install %s into %s: %w", name, dir, err)
	}
	renamed = true
	return sum.Sum(nil), nil
}
