//go:build !linux

package host

// limitProcessMemory does nothing where there is no prlimit: a plugin has only its GOMEMLIMIT,
// which slows it down before the limit but does not stop it.
func limitProcessMemory(int, int64) error { return nil }
