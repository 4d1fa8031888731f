package host

import (
	"bytes"
	"strconv"
	"sync/atomic"
)

// runtimeReserve is the memory a Go plugin maps as it starts but barely uses, which its
// hard limit counts (RLIMIT_DATA counts what is mapped writable, not what is used) and
// GOMEMLIMIT does not: measured on a static (CGO_ENABLED=0) plugin, VmData 76 MiB at rest
// (two regions of 32 MiB among it, the binary's zeroed data and runtime metadata, barely
// touched) for 14 MiB resident; past that, VmData grows as the heap does.
const runtimeReserve = 64 << 20

// softMemoryLimit is the GOMEMLIMIT of a plugin whose hard limit is limit: 80% of what is
// left for its heap beside the runtime's reserve, so that its garbage collector works hard
// well before the hard limit kills it.
func softMemoryLimit(limit int64) int64 {
	return max(limit-runtimeReserve, limit/2) / 5 * 4
}

// memoryEnv is the variable that sets the soft memory limit of a plugin; none without a
// limit.
func memoryEnv(limit int64) []string {
	if limit <= 0 {
		return nil
	}
	return []string{"GOMEMLIMIT=" + strconv.FormatInt(softMemoryLimit(limit), 10)}
}

// oomWatch reads a plugin's stderr (go-plugin copies each line to ClientConfig.Stderr in a
// Write of its own) for what the Go runtime writes as it dies out of memory, so that the
// calls the death fails can say why.
type oomWatch struct{ seen atomic.Bool }

// Write sees "fatal error: runtime: out of memory" (the heap could not grow) and
// "runtime: out of memory: cannot allocate ..." then "fatal error: out of memory".
func (w *oomWatch) Write(b []byte) (int, error) {
	if (bytes.HasPrefix(b, []byte("fatal error: ")) || bytes.HasPrefix(b, []byte("runtime: "))) && bytes.Contains(b, []byte("out of memory")) {
		w.seen.Store(true)
	}
	return len(b), nil
}
