package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	logsapi "k8s.io/component-base/logs/api/v1"
	// The JSON format adds its flags, as in the operator.
	_ "k8s.io/component-base/logs/json/register"
)

// operatorPkg is the operator's main package, relative to the module's root.
const operatorPkg = "./cmd/stepwise-operator"

// flagDoc is one flag as flag.PrintDefaults prints it.
type flagDoc struct {
	Name string
	// Type is the type PrintDefaults names ("string", "duration", "value" for a flag.Func),
	// empty for a bool.
	Type    string
	Usage   string
	Default string
}

// renderFlags builds the operator, asks it for its usage (-h) and lists its flags: its own,
// then the logging flags of component-base.
func renderFlags(root string) ([]byte, error) {
	usage, err := operatorUsage(root)
	if err != nil {
		return nil, err
	}
	flags, err := parseDefaults(usage)
	if err != nil {
		return nil, err
	}
	loggingNames := loggingFlags()
	var own, logging []flagDoc
	for _, f := range flags {
		if loggingNames[f.Name] {
			logging = append(logging, f)
		} else {
			own = append(own, f)
		}
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("the operator's usage lists no flag of its own:\n%s", usage)
	}

	var b bytes.Buffer
	b.WriteString("# The operator's flags\n\n")
	b.WriteString("Every flag of `stepwise-operator`, as `stepwise-operator -h` prints it (`" + operatorPkg[2:] +
		"/options.go`). [Operating](../operating.md) explains the main ones.\n\n")
	b.WriteString("A flag is given as `-name value`, `--name value` or `--name=value`; a bool flag alone is true " +
		"(`--leader-elect=false` turns one off).\n\n")
	writeFlags(&b, own)
	b.WriteString("\n## Logging\n\n")
	b.WriteString("The operator logs with klog, configured as Kubernetes' own components are (component-base): " +
		"`-v` sets the verbosity, `--logging-format=json` writes a JSON object per line, with the pipeline, step, " +
		"executor and hook of each line about a pipeline as keys.\n\n")
	writeFlags(&b, logging)
	return b.Bytes(), nil
}

func writeFlags(b *bytes.Buffer, flags []flagDoc) {
	rows := make([][]string, 0, len(flags))
	for _, f := range flags {
		typ := f.Type
		if typ == "" {
			typ = "bool"
		}
		rows = append(rows, []string{code("--" + f.Name), typ, code(f.Default), cell(f.Usage)})
	}
	table(b, []string{"flag", "type", "default", "what"}, rows)
}

// operatorUsage builds the operator into a temporary directory and returns what -h prints.
func operatorUsage(root string) (string, error) {
	dir, err := os.MkdirTemp("", "gen-reference-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "stepwise-operator")
	build := exec.Command("go", "build", "-o", bin, operatorPkg)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", operatorPkg, err, out)
	}
	help := exec.Command(bin, "-h")
	help.Env = []string{} // no POD_NAMESPACE or anything else that could change what it says
	out, err := help.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("stepwise-operator -h: %w\n%s", err, out)
	}
	return string(out), nil
}

// parseDefaults reads the flags out of flag.PrintDefaults' output: for each flag a line
// "  -name type" (the type left out for a bool; a one-letter bool flag has its usage on the
// same line after a tab), then its usage on lines that start with "    \t", the last
// ending in " (default VALUE)" when the default is not the type's zero value. Lines before
// the first flag (the usage's preamble) are skipped.
func parseDefaults(out string) ([]flagDoc, error) {
	var flags []flagDoc
	var usage []string
	flush := func() {
		if len(flags) == 0 {
			return
		}
		f := &flags[len(flags)-1]
		f.Usage, f.Default = splitDefault(strings.Join(usage, "\n"), f.Type)
		if f.Default == "" {
			f.Default = zeroValues[f.Type]
		}
		usage = nil
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  -"):
			flush()
			head, rest, inline := strings.Cut(line[3:], "\t")
			name, typ, _ := strings.Cut(head, " ")
			flags = append(flags, flagDoc{Name: name, Type: typ})
			if inline {
				usage = append(usage, rest)
			}
		case strings.HasPrefix(line, "    \t"):
			if len(flags) == 0 {
				return nil, fmt.Errorf("usage line before any flag: %q", line)
			}
			usage = append(usage, line[len("    \t"):])
		case len(flags) > 0 && strings.TrimSpace(line) != "":
			return nil, fmt.Errorf("unexpected line in the flags' usage: %q", line)
		}
	}
	flush()
	return flags, sc.Err()
}

// zeroValues are the defaults PrintDefaults leaves out, by type ("" for a bool).
var zeroValues = map[string]string{"": "false", "int": "0", "uint": "0", "float": "0", "duration": "0s"}

// splitDefault splits " (default VALUE)" off a flag's usage; a string's default is quoted.
func splitDefault(usage, typ string) (string, string) {
	i := strings.LastIndex(usage, " (default ")
	if i < 0 || !strings.HasSuffix(usage, ")") {
		return usage, ""
	}
	def := usage[i+len(" (default ") : len(usage)-1]
	if typ == "string" {
		if s, err := strconv.Unquote(def); err == nil {
			def = s
		}
	}
	return usage[:i], def
}

// loggingFlags are the names of the flags component-base's logging configuration adds.
func loggingFlags() map[string]bool {
	fs := flag.NewFlagSet("logging", flag.ContinueOnError)
	logsapi.AddGoFlags(logsapi.NewLoggingConfiguration(), fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}
