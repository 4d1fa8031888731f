package pgtest

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// serverUser is who runs initdb and postgres when we are root, as postgres refuses to
// run as root. Debian's postgresql-common creates it.
const serverUser = "postgres"

// credential is whom initdb and postgres run as: nil (ourselves) unless we are root,
// then serverUser with no supplementary groups, so that it keeps none of root's.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, postgres must run as user %q: %w", serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of %q: %w", serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of %q: %w", serverUser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// handOver gives dir to cred's user and lets that user reach it: a test's temp dir
// sits in a parent that only root may enter (os.MkdirTemp makes it 0700). Directories
// above dir get the search bit for others (not read), and only inside the temp root:
// anything else unreachable is an error rather than a chmod of, say, /root.
func handOver(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("give %s to %s: %w", dir, serverUser, err)
	}
	tmp, err := filepath.Abs(os.TempDir())
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if d != tmp && !strings.HasPrefix(d, tmp+string(filepath.Separator)) {
				return fmt.Errorf("user %s cannot reach %s: %s is not searchable by others (set TMPDIR elsewhere)", serverUser, dir, d)
			}
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("let %s reach %s: %w", serverUser, dir, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
