package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/tasks/k8s"
	"github.com/stepwise-dev/stepwise/tasks/node"
	"github.com/stepwise-dev/stepwise/tasks/testexec"
)

// executorGroup is a set of executors the operator registers together.
type executorGroup struct {
	// pkg is the name of the package whose Executors() the operator registers.
	pkg       string
	executors func() []executor.TaskExecutor
}

// builtin are the packages of cmd/stepwise-operator's builtinExecutors, in its order;
// checkBuiltin fails when that function registers others.
var builtin = []executorGroup{
	{"node", func() []executor.TaskExecutor { return node.Executors(nil) }}, // the rules do not change what they declare
	{"k8s", k8s.Executors},
}

// testExecutors are registered with --enable-test-executors.
var testExecutors = executorGroup{"testexec", testexec.Executors}

// builtinFunc is the function of cmd/stepwise-operator/executors.go that lists the built-in
// executors.
const builtinFunc = "builtinExecutors"

func renderExecutors(root string) ([]byte, error) {
	pkgs, err := registeredPackages(filepath.Join(root, "cmd", "stepwise-operator", "executors.go"), builtinFunc)
	if err != nil {
		return nil, err
	}
	var want []string
	for _, g := range builtin {
		want = append(want, g.pkg)
	}
	if !slices.Equal(pkgs, want) {
		return nil, fmt.Errorf("cmd/stepwise-operator's %s registers the executors of %v, hack/gen-reference lists %v: update its builtin",
			builtinFunc, pkgs, want)
	}

	var b bytes.Buffer
	b.WriteString("# Built-in executors\n\n")
	b.WriteString("Every executor compiled into the operator, as its `Describe` declares it (`tasks/`). " +
		"[Built-in executors](../executors.md) says more of what each does; " +
		"`kubectl stepwise executors NAME` shows the same for a running operator, plugins' executors included.\n\n")
	b.WriteString("Before any hook runs, the engine checks a step's parameters against these declarations: a required one " +
		"must be set, a value must have its type (an enum one of its values), and, when every parameter " +
		"has a type, a parameter the executor does not declare is refused. A parameter not set gets its default.\n\n")
	var all []executor.TaskExecutor
	for _, g := range builtin {
		all = append(all, g.executors()...)
	}
	writeExecutors(&b, all)
	b.WriteString("## Test executors\n\n")
	b.WriteString("Registered only with `--enable-test-executors`: for tests, the demo and benchmarks (`tasks/testexec`).\n\n")
	writeExecutors(&b, testExecutors.executors())
	return b.Bytes(), nil
}

func writeExecutors(b *bytes.Buffer, execs []executor.TaskExecutor) {
	for _, e := range execs {
		d := executor.Describe(e)
		fmt.Fprintf(b, "### `%s`\n\n", e.Name())
		if d.Description != "" {
			b.WriteString(strings.Join(strings.Fields(d.Description), " ") + "\n\n")
		}
		var facts []string
		if _, ok := e.(executor.Planner); ok {
			facts = append(facts, "plans a dry run (`spec.dryRun`)")
		} else {
			facts = append(facts, "gives no plan of a dry run")
		}
		if d.UpdatesInPlace {
			facts = append(facts, "updates in place: under `updatePolicy: Rerun`, a run with other parameters updates what the last run created rather than tearing it down first")
		}
		switch {
		case len(d.Parameters) == 0:
			facts = append(facts, "declares no parameter, so a step may give it any")
		case complete(d.Parameters):
			facts = append(facts, "refuses a parameter it does not declare")
		default:
			facts = append(facts, "takes parameters it does not declare")
		}
		b.WriteString("It " + strings.Join(facts, "; ") + ".\n\n")
		if len(d.Parameters) == 0 {
			continue
		}
		rows := make([][]string, 0, len(d.Parameters))
		for _, p := range d.Parameters {
			required := ""
			if p.Required {
				required = "yes"
			}
			values := make([]string, len(p.Values))
			for i, v := range p.Values {
				values[i] = code(v)
			}
			rows = append(rows, []string{code(p.Name), string(p.Type), required, code(p.Default),
				strings.Join(values, ", "), cell(p.Description)})
		}
		table(b, []string{"parameter", "type", "required", "default", "values", "description"}, rows)
		b.WriteString("\n")
	}
}

// complete tells whether every parameter has a type (contract.CheckParams then refuses
// undeclared ones).
func complete(params []contract.Parameter) bool {
	for _, p := range params {
		if p.Type == "" {
			return false
		}
	}
	return true
}

// registeredPackages lists, in order, the packages whose Executors() the function fn of
// file calls: what the operator registers.
func registeredPackages(file, fn string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		return nil, err
	}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Recv != nil || fd.Body == nil {
			continue
		}
		var pkgs []string
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Executors" {
				if id, ok := sel.X.(*ast.Ident); ok {
					pkgs = append(pkgs, id.Name)
				}
			}
			return true
		})
		return pkgs, nil
	}
	return nil, fmt.Errorf("%s has no func %s", file, fn)
}
