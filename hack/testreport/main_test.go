package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReport: each package's output is written whole when it ends, in the order the
// packages end; the summary lists the targets and the packages from the longest; a failed
// package, or one the stream cut off, makes the report fail.
func TestReport(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"a"}`,
		`{"Action":"start","Package":"b"}`,
		`{"Action":"output","Package":"a","Test":"TestA","Output":"=== RUN TestA\n"}`,
		`{"Action":"output","Package":"b","Output":"ok  \tb\t3.0s\n"}`,
		`{"Action":"pass","Package":"b","Elapsed":3}`,
		`{"Action":"output","Package":"a","Test":"TestA","Output":"--- PASS: TestA\n"}`,
		`{"Action":"output","Package":"a","Output":"PASS\n"}`,
		`{"Action":"pass","Package":"a","Test":"TestA/sub","Elapsed":0.5}`,
		`{"Action":"pass","Package":"a","Test":"TestA","Elapsed":1}`,
		`{"Action":"output","Package":"a","Output":"ok  \ta\t1.5s\n"}`,
		`{"Action":"pass","Package":"a","Elapsed":1.5}`,
		`# c`,
		`{"Action":"build-output","Package":"c","Output":"c.go:1: syntax error\n"}`,
		`{"Action":"fail","Package":"c","Elapsed":0}`,
	}, "\n")
	targets := filepath.Join(t.TempDir(), "timings.tsv")
	require.NoError(t, os.WriteFile(targets, []byte("build\t10.5\nlint\t4\nbuild\t1.5\n"), 0o644))
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(20 * time.Second); return clock }

	var out strings.Builder
	ok, err := report([]io.Reader{strings.NewReader(stream)}, &out, targets, 10, now)
	require.NoError(t, err)
	assert.False(t, ok, "c failed")
	text := out.String()
	assert.True(t, strings.HasPrefix(text, "ok  \tb\t3.0s\nok  \ta\t1.5s\n# c\nc.go:1: syntax error\n"), "a passing package's own lines, a failing one's all:\n%s", text)
	assert.Contains(t, text, "make targets before the tests (recipes' own time; two at once): 16s in all\n  build  12s\n  lint   4s\n")
	assert.Contains(t, text, "go test: 20s wall; the packages' test binaries ran 4.5s in all;")
	assert.Contains(t, text, "2 passed, 1 failed, 0 without tests\n  b  3s    pass\n  a  1.5s  pass\n  c  0s    fail\n")
	assert.Contains(t, text, "the longest tests (a parallel test's from when it resumed):\n  a TestA  1s  pass\n")

	out.Reset()
	ok, err = report([]io.Reader{strings.NewReader(`{"Action":"output","Package":"d","Test":"TestD","Output":"=== RUN TestD\n"}`)}, &out, "", 10, time.Now)
	require.NoError(t, err)
	assert.False(t, ok, "d never ended")
	assert.Contains(t, out.String(), "=== RUN TestD\nd: the stream ended before the package did\n")

	out.Reset()
	ok, err = report([]io.Reader{strings.NewReader(`{"Action":"pass","Package":"e","Elapsed":0.1}`)}, &out, filepath.Join(t.TempDir(), "none"), 10, time.Now)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.NotContains(t, out.String(), "make targets")
}

// TestReportOfTwoStreams: two go test commands report together; a package that fails in
// either fails the report, and the summary counts both.
func TestReportOfTwoStreams(t *testing.T) {
	race := strings.NewReader(`{"Action":"start","Package":"unit"}
{"Action":"output","Package":"unit","Output":"ok  \tunit\t1.0s\n"}
{"Action":"pass","Package":"unit","Elapsed":1}`)
	e2e := strings.NewReader(`{"Action":"start","Package":"e2e"}
{"Action":"output","Package":"e2e","Test":"TestE","Output":"e2e.go:9: no\n"}
{"Action":"fail","Package":"e2e","Test":"TestE","Elapsed":2}
{"Action":"fail","Package":"e2e","Elapsed":2}`)
	var out strings.Builder
	ok, err := report([]io.Reader{race, e2e}, &out, "", 10, time.Now)
	require.NoError(t, err)
	assert.False(t, ok, "e2e failed")
	assert.Contains(t, out.String(), "ok  \tunit\t1.0s\n")
	assert.Contains(t, out.String(), "e2e.go:9: no\n")
	assert.Contains(t, out.String(), "1 passed, 1 failed, 0 without tests")
}
