package host

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// limitProcessMemory sets the hard limit of process pid on the memory it maps. RLIMIT_DATA,
// not RLIMIT_AS: a Go program reserves far more address space than it uses (VmSize
// 1.2 GiB at rest, as PROT_NONE ranges), which counts toward RLIMIT_AS but, since Linux
// 4.7, not toward RLIMIT_DATA, which counts private writable mappings: heap, stacks, data.
// Over it the runtime cannot grow its heap and dies: "fatal error: out of memory".
func limitProcessMemory(pid int, limit int64) error {
	if limit <= 0 {
		return nil
	}
	rl := unix.Rlimit{Cur: uint64(limit), Max: uint64(limit)}
	if err := unix.Prlimit(pid, unix.RLIMIT_DATA, &rl, nil); err != nil {
		return fmt.Errorf("set the memory limit (RLIMIT_DATA) of process %d: %w", pid, err)
	}
	return nil
}
