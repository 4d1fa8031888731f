package host

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// findPlugins lists the executables named stepwise-plugin-* in dir, and with nested in its
// subdirectories too (an image volume per plugin, mounted there); other files with that
// prefix are logged and skipped, signatures (layout.SignatureSuffix) silently.
func (h *Host) findPlugins(dir string, nested bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read plugin directory: %w", err)
	}
	var paths []string
	for _, e := range entries {
		if nested && e.IsDir() {
			inner, err := h.findPlugins(filepath.Join(dir, e.Name()), false)
			if err != nil {
				return nil, err
			}
			paths = append(paths, inner...)
			continue
		}
		if !strings.HasPrefix(e.Name(), Prefix) || e.IsDir() || strings.HasSuffix(e.Name(), layout.SignatureSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			h.logger.Info("Ignoring a plugin file that is not an executable", "path", filepath.Join(dir, e.Name()))
			continue
		}
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	return paths, nil
}

// readChecksums reads a sha256sum-format file: "<hex>  <file name>" a line.
func readChecksums(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sums := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"<sha256>  <file>\"", path, n)
		}
		sum, err := hex.DecodeString(fields[0])
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s:%d: %q is not a SHA-256 in hex", path, n, fields[0])
		}
		sums[filepath.Base(strings.TrimPrefix(fields[1], "*"))] = sum
	}
	return sums, sc.Err()
}
