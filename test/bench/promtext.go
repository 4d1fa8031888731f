package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// samples is a scrape of a /metrics endpoint.
type samples []sample

// parseMetrics reads the Prometheus text format. It keeps only the families named in keep
// (all of them when keep is empty), since the API server exposes thousands of series.
func parseMetrics(r io.Reader, keep ...string) (samples, error) {
	var out samples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			return nil, fmt.Errorf("metric line without a value: %q", line)
		}
		name := line[:end]
		if len(keep) > 0 && !hasPrefixAny(name, keep) {
			continue
		}
		s := sample{name: name, labels: map[string]string{}}
		rest := line[end:]
		if rest[0] == '{' {
			var err error
			if rest, err = parseLabels(rest[1:], s.labels); err != nil {
				return nil, fmt.Errorf("metric line %q: %w", line, err)
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metric line without a value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// hasPrefixAny reports whether name is one of the families (a histogram's _sum, _count and
// _bucket series belong to its family).
func hasPrefixAny(name string, families []string) bool {
	for _, f := range families {
		if strings.HasPrefix(name, f) {
			return true
		}
	}
	return false
}

// parseLabels parses `a="x",b="y"}` into labels and returns what follows the brace.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return "", fmt.Errorf("bad label in %q", s)
		}
		key := strings.TrimSpace(s[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", fmt.Errorf("unterminated label value in %q", s)
		}
		labels[key] = val.String()
		s = s[i+1:]
	}
}

// sum adds the values of the series of name whose labels match every pair in match.
func (ss samples) sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, s := range ss {
		if s.name == name && matches(s.labels, match) {
			total += s.value
		}
	}
	return total
}

// by adds the values of the series of name that match, grouped by key(labels); series for
// which key returns "" are left out.
func (ss samples) by(name string, match map[string]string, key func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		if s.name != name || !matches(s.labels, match) {
			continue
		}
		if k := key(s.labels); k != "" {
			out[k] += s.value
		}
	}
	return out
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// diff returns after - before for every key, dropping keys that did not change.
func diff(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok && v != 0 {
			out[k] = -v
		}
	}
	return out
}
