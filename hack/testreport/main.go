// Command testreport reads `go test -json` on its standard input (or on each file it is
// given, read at once, so that several go test commands can report together), writes each package's
// output as `go test` without -v would (whole, when the package ends, so that two
// packages running at once do not interleave: a passing package's own lines, a failing
// package's every line), and ends with where the time went: the wall time of the
// tests, each package's own run time (its test binary's, as go test reports it) from the
// longest, and, given -targets, the time of each make target that ran before (the lines
// hack/timed-shell appended). It exits 1 when a package failed or the stream ended
// before every package did, so that `go test -json ... | testreport` fails as go test.
//
//	go test -json -race ./... | testreport -targets bin/timings.tsv
//	go test -json ./e2e/... >fifo & go test -json -race ./pkg/... | testreport - fifo
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

func main() {
	targets := flag.String("targets", "", "a file of TARGET<TAB>SECONDS lines, one a recipe line (hack/timed-shell)")
	top := flag.Int("top", 25, "how many of the longest packages, and of the longest top-level tests, to list")
	flag.Usage = func() {
		_, _ = fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] [FILE...] (- or none: standard input)\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	ins, err := open(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	ok, err := report(ins, os.Stdout, *targets, *top, time.Now)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// output is what a package printed: all of it, and its own lines (not a test's), which
// is what go test shows of a package that passed.
type output struct{ all, own strings.Builder }

// result is one package's end.
type result struct {
	pkg     string
	action  string // pass, fail or skip
	elapsed time.Duration
}

// report copies the stream's output to out, package by package, and the summary after.
// It tells whether every package that started passed.
func report(ins []io.Reader, out io.Writer, targetsFile string, top int, now func() time.Time) (bool, error) {
	started := now()
	pending := map[string]*output{}
	var order []string // packages in the order they were seen
	var results []result
	var tests []result // top-level tests that ended, as "package TestName"
	stream, errs := lines(ins)
	for line := range stream {
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (a build error printed as it is): pass it on.
			if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
				return false, err
			}
			continue
		}
		b, seen := pending[e.Package]
		if !seen {
			b = &output{}
			pending[e.Package] = b
			order = append(order, e.Package)
		}
		switch {
		case e.Test != "" && !strings.Contains(e.Test, "/") && (e.Action == "pass" || e.Action == "fail"):
			tests = append(tests, result{pkg: e.Package + " " + e.Test, action: e.Action, elapsed: seconds(e.Elapsed)})
		case e.Action == "output", e.Action == "build-output":
			b.all.WriteString(e.Output)
			if e.Test == "" && e.Output != "PASS\n" {
				b.own.WriteString(e.Output)
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			shown := b.own.String()
			if e.Action == "fail" {
				shown = b.all.String()
			}
			if _, err := io.WriteString(out, shown); err != nil {
				return false, err
			}
			delete(pending, e.Package)
			results = append(results, result{pkg: e.Package, action: e.Action, elapsed: seconds(e.Elapsed)})
		}
	}
	if err := <-errs; err != nil {
		return false, err
	}
	ok := true
	for _, pkg := range order {
		if b, unfinished := pending[pkg]; unfinished {
			// Cut off (a timeout, a crash of go test): what it printed, and that it did not end.
			_, _ = io.WriteString(out, b.all.String())
			_, _ = fmt.Fprintf(out, "%s: the stream ended before the package did\n", pkg)
			ok = false
		}
	}
	wall := now().Sub(started)
	for _, r := range results {
		ok = ok && r.action != "fail"
	}
	targets, err := readTargets(targetsFile)
	if err != nil {
		return ok, err
	}
	return ok, summary(out, results, tests, targets, wall, top)
}

// open opens the streams named: a file, a named pipe, or - for the standard input.
func open(names []string) ([]io.Reader, error) {
	if len(names) == 0 {
		return []io.Reader{os.Stdin}, nil
	}
	ins := make([]io.Reader, 0, len(names))
	for _, name := range names {
		if name == "-" {
			ins = append(ins, os.Stdin)
			continue
		}
		f, err := os.Open(name) //nolint:gosec // a stream the caller names
		if err != nil {
			return nil, fmt.Errorf("open go test's events: %w", err)
		}
		ins = append(ins, f)
	}
	return ins, nil
}

// lines reads every stream at once, line by line, and sends each whole line: a stream is
// read until it ends, so that no writer blocks on a full pipe while another is read.
func lines(ins []io.Reader) (<-chan []byte, <-chan error) {
	out := make(chan []byte)
	errs := make(chan error, len(ins))
	var wg sync.WaitGroup
	for _, in := range ins {
		wg.Go(func() {
			sc := bufio.NewScanner(in)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				out <- slices.Clone(sc.Bytes())
			}
			if err := sc.Err(); err != nil {
				errs <- fmt.Errorf("read go test's events: %w", err)
			}
		})
	}
	go func() {
		wg.Wait()
		close(out)
		close(errs)
	}()
	return out, errs
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// readTargets sums the recipe lines' times by target, longest first; none without a file.
func readTargets(path string) ([]result, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the targets' times: %w", err)
	}
	sums := map[string]time.Duration{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		target, secs, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(secs), 64)
		if err != nil {
			continue
		}
		sums[target] += seconds(s)
	}
	out := make([]result, 0, len(sums))
	for target, d := range sums {
		out = append(out, result{pkg: target, elapsed: d})
	}
	slices.SortFunc(out, func(a, b result) int { return int(b.elapsed - a.elapsed) })
	return out, nil
}

// summary writes where the time went.
func summary(out io.Writer, results, tests, targets []result, wall time.Duration, top int) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(targets) > 0 {
		var sum time.Duration
		for _, t := range targets {
			sum += t.elapsed
		}
		_, _ = fmt.Fprintf(tw, "\nmake targets before the tests (recipes' own time; two at once): %s in all\n", round(sum))
		for _, t := range targets {
			_, _ = fmt.Fprintf(tw, "  %s\t%s\n", t.pkg, round(t.elapsed))
		}
	}
	byTime := slices.Clone(results)
	slices.SortFunc(byTime, func(a, b result) int { return int(b.elapsed - a.elapsed) })
	var run time.Duration
	counts := map[string]int{}
	for _, r := range results {
		run += r.elapsed
		counts[r.action]++
	}
	// Test binaries run -p at a time (the cores' number) beside compiling and linking the
	// next: the run times' sum and the wall tell how much of it was compiling.
	_, _ = fmt.Fprintf(tw, "\ngo test: %s wall; the packages' test binaries ran %s in all; %d passed, %d failed, %d without tests\n",
		round(wall), round(run), counts["pass"], counts["fail"], counts["skip"])
	for i, r := range byTime {
		if i == top {
			_, _ = fmt.Fprintf(tw, "  (%d more)\n", len(byTime)-top)
			break
		}
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.pkg, round(r.elapsed), r.action)
	}
	// A parallel test's time counts from when it resumed, so these overlap within a package.
	slices.SortFunc(tests, func(a, b result) int { return int(b.elapsed - a.elapsed) })
	if len(tests) > top {
		tests = tests[:top]
	}
	if len(tests) > 0 {
		_, _ = fmt.Fprintf(tw, "\nthe longest tests (a parallel test's from when it resumed):\n")
	}
	for _, r := range tests {
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.pkg, round(r.elapsed), r.action)
	}
	return tw.Flush()
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
