package pgtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNotFound is returned when no PostgreSQL server binaries are installed.
var ErrNotFound = errors.New("PostgreSQL not found: run `make postgresql`")

// debianBinDirs is where Debian's postgresql-NN packages put the server.
const debianBinDirs = "/usr/lib/postgresql/*/bin"

// binDir finds the directory holding initdb and postgres: $PG_BINDIR, else what
// pg_config says, else Debian's newest /usr/lib/postgresql/NN/bin.
func binDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		if !hasServer(d) {
			return "", errors.New("PG_BINDIR=" + d + " has no initdb and postgres")
		}
		return d, nil
	}
	// pg_config may come from a client-only package (libpq-dev) of another version, so
	// what it names must hold the server too.
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); hasServer(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob(debianBinDirs)
	slices.SortFunc(dirs, func(a, b string) int { return majorOf(b) - majorOf(a) })
	for _, d := range dirs {
		if hasServer(d) {
			return d, nil
		}
	}
	return "", ErrNotFound
}

// majorOf is NN of /usr/lib/postgresql/NN/bin, 0 when it is not a number.
func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
