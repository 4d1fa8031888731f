package host

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir holds an exclusive lock on the file lock until it is closed (by Close, or by
// the kernel when the process dies, SIGKILL included). The file is locked under another
// name and then renamed: a lock file that exists unlocked only ever belongs to a host that
// is gone, so another host starting at the same moment cannot take it for abandoned.
func lockDir(lock string) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(lock), "."+filepath.Base(lock)+"-")
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	if err := os.Rename(f.Name(), lock); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// abandoned tells whether the lock file exists and no process holds it.
func abandoned(lock string) bool {
	f, err := os.OpenFile(lock, os.O_RDWR, 0)
	if err != nil {
		return false // no lock file: a directory being made, or not ours
	}
	defer func() { _ = f.Close() }()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false
	}
	return err == nil
}
