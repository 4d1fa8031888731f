package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// reasonSource is a package whose constants named by pattern are reasons.
type reasonSource struct {
	dir     string
	pattern *regexp.Regexp
}

var reasonSources = []reasonSource{
	{"pkg/apis/stepwise/v1alpha1", regexp.MustCompile(`^Reason[A-Z]`)},
	{"pkg/apis/stepwise/v1alpha1", regexp.MustCompile(`^TriggerReason[A-Z]`)},
	{"pkg/contract", regexp.MustCompile(`^Reason[A-Z]`)},
	{"pkg/plugin/client", regexp.MustCompile(`^Reason[A-Z]`)},
	{"pkg/controller", regexp.MustCompile(`^reason[A-Z]`)},
	{"pkg/sdk", regexp.MustCompile(`^reason[A-Z]`)},
}

// eventSource is a package whose calls record Events, and on what.
type eventSource struct {
	dir   string
	title string
}

var eventSources = []eventSource{
	{"pkg/controller", "Events the engine records on a Pipeline"},
	{"pkg/trigger", "Events the trigger controller records on a PipelineTrigger"},
}

func renderReasons(root string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Reasons and Events\n\n")
	b.WriteString("The reasons of the conditions of pipelines, of their steps and of triggers, from the constants that name them and their doc comments, " +
		"and every Event the engine and the trigger controller record, from the calls that record them. " +
		"A step's condition also carries the reason its executor gives: its own (a plugin's included), " +
		"else one the engine reads from the Kubernetes API's error (such as `Forbidden`), else `HookFailed`. " +
		"[Concepts](../concepts.md) and [Operating](../operating.md) say what to do about the common ones.\n\n")
	b.WriteString("## Reasons\n\n")
	for _, src := range reasonSources {
		groups, err := constGroups(filepath.Join(root, src.dir), src.pattern)
		if err != nil {
			return nil, err
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("%s has no constant matching %s", src.dir, src.pattern)
		}
		for _, g := range groups {
			writeConstGroup(&b, src.dir, g)
		}
	}
	b.WriteString("## Events\n\n")
	b.WriteString("`Normal` Events say what happened; `Warning` Events what went wrong or was skipped. " +
		"A message is the format the code fills in (`%q` a quoted value, `%s` and `%v` a value, `%d` a number).\n\n")
	for _, src := range eventSources {
		events, err := packageEvents(filepath.Join(root, src.dir))
		if err != nil {
			return nil, err
		}
		if len(events) == 0 {
			return nil, fmt.Errorf("%s records no Event", src.dir)
		}
		fmt.Fprintf(&b, "### %s\n\n(`%s`)\n\n", src.title, src.dir)
		rows := make([][]string, 0, len(events))
		for _, e := range events {
			rows = append(rows, []string{code(e.Reason), e.Type, code(e.Message), e.File})
		}
		table(&b, []string{"reason", "type", "message", "recorded in"}, rows)
		b.WriteString("\n")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// constant is one string constant and its doc comment.
type constant struct {
	Name, Value string
	// Doc is the constant's own comment, in paragraphs.
	Doc []string
}

// constGroup is one const ( ... ) block, its comment and the constants in it that match;
// or the constants of a package declared one by one (const X = "..."), each with its own
// comment.
type constGroup struct {
	File   string
	Doc    []string
	Consts []constant
	single bool
}

// constGroups reads the non-test Go files of dir, in the order of their names, and returns
// each const block with string constants whose name matches pattern.
func constGroups(dir string, pattern *regexp.Regexp) ([]constGroup, error) {
	files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	var groups []constGroup
	for _, pf := range files {
		for _, decl := range pf.file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			g := constGroup{File: pf.name, Doc: paragraphs(gd.Doc)}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				doc := vs.Doc
				if doc == nil && !gd.Lparen.IsValid() {
					doc = gd.Doc // const X = "..." with its comment above
				}
				for i, name := range vs.Names {
					if !pattern.MatchString(name.Name) || i >= len(vs.Values) {
						continue
					}
					value, ok := stringLit(vs.Values[i])
					if !ok {
						continue
					}
					g.Consts = append(g.Consts, constant{Name: name.Name, Value: value, Doc: paragraphs(doc)})
				}
			}
			if len(g.Consts) == 0 {
				continue
			}
			if gd.Lparen.IsValid() {
				groups = append(groups, g)
				continue
			}
			// Single constants, each with its own comment, make one group of the package.
			if len(groups) > 0 && groups[len(groups)-1].single {
				last := &groups[len(groups)-1]
				if !slices.Contains(strings.Split(last.File, ", "), pf.name) {
					last.File += ", " + pf.name
				}
				last.Consts = append(last.Consts, g.Consts...)
				continue
			}
			g.Doc, g.single = nil, true
			groups = append(groups, g)
		}
	}
	return groups, nil
}

// writeConstGroup writes a block of constants as a table, under the first sentence of the
// block's comment. A paragraph of a constant's comment before its last (such as
// "Ready=True.") introduces the constants from it on, between tables.
func writeConstGroup(b *bytes.Buffer, dir string, g constGroup) {
	title, rest := "Other reasons in "+dir, ""
	if len(g.Doc) > 0 {
		first, more, _ := strings.Cut(g.Doc[0], ". ")
		title = strings.TrimSuffix(first, ".")
		rest = strings.Join(append([]string{more}, g.Doc[1:]...), "\n\n")
	}
	fmt.Fprintf(b, "### %s\n\n(`%s`, %s)", title, dir, g.File)
	if rest = strings.TrimSpace(rest); rest != "" {
		b.WriteString(" " + rest)
	}
	b.WriteString("\n\n")
	var rows [][]string
	flush := func() {
		if len(rows) > 0 {
			table(b, []string{"reason", "constant", "meaning"}, rows)
			b.WriteString("\n")
			rows = nil
		}
	}
	for _, c := range g.Consts {
		meaning := ""
		if n := len(c.Doc); n > 0 {
			for _, intro := range c.Doc[:n-1] {
				flush()
				b.WriteString(intro + "\n\n")
			}
			meaning = strings.TrimPrefix(c.Doc[n-1], c.Name+": ")
		}
		rows = append(rows, []string{code(c.Value), code(c.Name), cell(meaning)})
	}
	flush()
}

// event is one call that records an Event.
type event struct {
	Type, Reason, Message, File string
}

// recorder says which arguments of a function that records or makes Events are the
// Event's type, reason and message (its format): an argument's index, or the value itself.
type recorder struct {
	Type, Reason, Message role
	// makes: the function returns the Event, which its caller records (the engine's
	// constructors, such as stepFailed); otherwise it records the Event itself.
	makes bool
	// method: the function is called as x.name(...); otherwise as name(...), so that a
	// constructor of the package is not taken for a method of the same name.
	method bool
}

// role is an argument's index (arg >= 0) or, with arg -1, a value.
type role struct {
	arg   int
	value string
}

func argRole(i int) role         { return role{arg: i} }
func valueRole(v string) role    { return role{arg: -1, value: v} }
func (r role) fixed() bool       { return r.arg < 0 }
func (r recorder) arity() int    { return max(r.Type.arg, r.Reason.arg, r.Message.arg) + 1 }
func (r recorder) roles() []role { return []role{r.Type, r.Reason, r.Message} }

// baseRecorders record or make Events: client-go's EventRecorder records them, and the
// engine's normal and warning make them, for its constructors (one per Event, such as
// stepFailed) to return and a sync to record after its status write.
func baseRecorders() map[string]recorder {
	return map[string]recorder{
		"Event":   {Type: argRole(1), Reason: argRole(2), Message: argRole(3), method: true},
		"Eventf":  {Type: argRole(1), Reason: argRole(2), Message: argRole(3), method: true},
		"normal":  {Type: valueRole("Normal"), Reason: argRole(0), Message: argRole(1), makes: true},
		"warning": {Type: valueRole("Warning"), Reason: argRole(0), Message: argRole(1), makes: true},
	}
}

// eventTypes are client-go's names of the Events' types.
var eventTypes = map[string]string{"EventTypeNormal": "Normal", "EventTypeWarning": "Warning"}

// packageEvents finds the Events the non-test Go files of dir record. A function that
// passes its own parameters on as an Event's type, reason or message to a recorder (such
// as the trigger's event and reportWaiting) is a recorder too. A function that returns the
// Event a maker (normal, warning) makes is a constructor (such as the engine's
// stepFailed): the Event is recorded where the constructor is called, in that file, and a
// constructor makes one Event. Every other call of a recorder or maker must name its type
// and reason with constants (of the package or of v1alpha1) or literals, or take them from
// a struct (the engine's queued Events, recorded later).
func packageEvents(dir string) ([]event, error) {
	files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	consts, err := stringConsts(files)
	if err != nil {
		return nil, err
	}
	api, err := parseDir(filepath.Join(filepath.Dir(dir), "apis", "stepwise", "v1alpha1"))
	if err != nil {
		return nil, err
	}
	apiConsts, err := stringConsts(api)
	if err != nil {
		return nil, err
	}
	resolve := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			return stringLit(e)
		case *ast.Ident:
			v, ok := consts[e.Name]
			return v, ok
		case *ast.SelectorExpr:
			if pkg, ok := e.X.(*ast.Ident); ok {
				if t, ok := eventTypes[e.Sel.Name]; ok && pkg.Name == "corev1" {
					return t, true
				}
				if pkg.Name == "v1alpha1" {
					v, ok := apiConsts[e.Sel.Name]
					return v, ok
				}
			}
		}
		return "", false
	}

	recorders := baseRecorders()
	funcs := funcDecls(files)
	// Find the wrappers: a function that calls a recorder with its own parameters, the
	// Event's type and reason known (from its parameters, or constants); and the
	// constructors: a function that returns what a maker makes, its type and reason known.
	for changed := true; changed; {
		changed = false
		for _, fd := range funcs {
			name := fd.decl.Name.Name
			if _, ok := recorders[name]; ok {
				continue
			}
			params := paramIndex(fd.decl)
			var made []*ast.CallExpr
			forEachRecording(fd.decl, recorders, func(rec recorder, call *ast.CallExpr, returned bool) {
				makes := rec.makes && returned
				if makes {
					made = append(made, call)
				}
				var roles [3]role
				wrapper := false
				for i, r := range rec.roles() {
					if r.fixed() {
						roles[i] = r
						continue
					}
					arg := argOf(call, r, i)
					if idx, ok := paramOf(arg, params); ok {
						roles[i], wrapper = argRole(idx), true
						continue
					}
					v, ok := resolve(arg)
					if !ok && i < 2 {
						return
					}
					roles[i] = valueRole(v)
				}
				if wrapper || makes {
					recorders[name] = recorder{Type: roles[0], Reason: roles[1], Message: roles[2], makes: makes, method: fd.decl.Recv != nil}
					changed = true
				}
			})
			if len(made) > 1 {
				pos := fd.fset.Position(made[1].Pos())
				return nil, fmt.Errorf("%s:%d: %s returns more than one Event: make each with a function of its own", filepath.Base(pos.Filename), pos.Line, name)
			}
		}
	}

	var events []event
	called := map[string]bool{}
	for _, fd := range funcs {
		params := paramIndex(fd.decl)
		self, isRecorder := recorders[fd.decl.Name.Name]
		var err error
		forEachRecording(fd.decl, recorders, func(rec recorder, call *ast.CallExpr, returned bool) {
			called[callName(call)] = true
			if err != nil || rec.makes && returned && self.makes {
				return // a constructor: its callers record
			}
			var values [3]string
			for i, r := range rec.roles() {
				if r.fixed() {
					values[i] = r.value
					continue
				}
				arg := argOf(call, r, i)
				if _, ok := paramOf(arg, params); ok && isRecorder {
					return // a recorder passing its parameters on: its callers record
				}
				v, ok := resolve(arg)
				if _, sel := arg.(*ast.SelectorExpr); !ok && sel && i < 2 && !isPackage(arg, files) {
					return // a field of a queued Event (emitEvents): recorded where it was queued
				}
				if !ok && i < 2 {
					pos := fd.fset.Position(call.Pos())
					err = fmt.Errorf("%s:%d: cannot tell the Event's %s from %s", filepath.Base(pos.Filename), pos.Line,
						[]string{"type", "reason"}[i], exprString(fd.fset, arg))
					return
				}
				values[i] = v
			}
			events = append(events, event{Type: values[0], Reason: values[1], Message: values[2], File: fd.file})
		})
		if err != nil {
			return nil, err
		}
	}
	for _, fd := range funcs {
		name := fd.decl.Name.Name
		if rec, ok := recorders[name]; ok && rec.makes && !called[name] {
			pos := fd.fset.Position(fd.decl.Pos())
			return nil, fmt.Errorf("%s:%d: nothing records the Event %s makes", filepath.Base(pos.Filename), pos.Line, name)
		}
	}
	slices.SortStableFunc(events, func(a, b event) int {
		return strings.Compare(a.Reason+"\x00"+a.Type+"\x00"+a.Message+"\x00"+a.File, b.Reason+"\x00"+b.Type+"\x00"+b.Message+"\x00"+b.File)
	})
	return slices.Compact(events), nil
}

// argOf is the argument of call that gives role r, the i-th of type, reason and message:
// for the message, the format of a fmt.Sprintf.
func argOf(call *ast.CallExpr, r role, i int) ast.Expr {
	arg := unparen(call.Args[r.arg])
	if sp, ok := arg.(*ast.CallExpr); ok && i == 2 && len(sp.Args) > 0 {
		if sel, ok := sp.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" {
				return unparen(sp.Args[0])
			}
		}
	}
	return arg
}

// paramOf tells whether e names one of the function's parameters, and which.
func paramOf(e ast.Expr, params map[string]int) (int, bool) {
	id, ok := e.(*ast.Ident)
	if !ok {
		return 0, false
	}
	idx, ok := params[id.Name]
	return idx, ok
}

// isPackage tells whether e is pkg.Name for an imported package: a constant it could not
// resolve, rather than a field.
func isPackage(e ast.Expr, files []parsedFile) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	for _, pf := range files {
		for _, imp := range pf.file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == id.Name {
				return true
			}
		}
	}
	return false
}

// forEachRecording calls f for every call in fd's body of a recorder, by name and as a
// method or a function, with enough arguments; returned tells whether fd returns what the
// call returns (return name(...), not in a function literal).
func forEachRecording(fd *ast.FuncDecl, recorders map[string]recorder, f func(rec recorder, call *ast.CallExpr, returned bool)) {
	if fd.Body == nil {
		return
	}
	results := map[*ast.CallExpr]bool{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			for _, r := range n.Results {
				if call, ok := unparen(r).(*ast.CallExpr); ok {
					results[call] = true
				}
			}
		}
		return true
	})
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		_, method := call.Fun.(*ast.SelectorExpr)
		if rec, ok := recorders[callName(call)]; ok && rec.method == method && len(call.Args) >= rec.arity() {
			f(rec, call, results[call])
		}
		return true
	})
}

// callName is the name of the function or method call calls, or "".
func callName(call *ast.CallExpr) string {
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name
	case *ast.SelectorExpr:
		return fn.Sel.Name
	}
	return ""
}

// paramIndex maps the names of fd's parameters to their positions.
func paramIndex(fd *ast.FuncDecl) map[string]int {
	out := map[string]int{}
	i := 0
	for _, field := range fd.Type.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, n := range field.Names {
			out[n.Name] = i
			i++
		}
	}
	return out
}

// parsedFile is one Go file of a package.
type parsedFile struct {
	name string
	fset *token.FileSet
	file *ast.File
}

// funcDecl is a function and the file it is in.
type funcDecl struct {
	file string
	fset *token.FileSet
	decl *ast.FuncDecl
}

func funcDecls(files []parsedFile) []funcDecl {
	var out []funcDecl
	for _, pf := range files {
		for _, d := range pf.file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				out = append(out, funcDecl{file: pf.name, fset: pf.fset, decl: fd})
			}
		}
	}
	return out
}

// parseDir parses the non-test Go files of dir, in the order of their names.
func parseDir(dir string) ([]parsedFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []parsedFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, parsedFile{name: name, fset: fset, file: f})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	return files, nil
}

// stringConsts are the package-level string constants of files, by name.
func stringConsts(files []parsedFile) (map[string]string, error) {
	out := map[string]string{}
	for _, pf := range files {
		for _, d := range pf.file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := stringLit(vs.Values[i]); ok {
							out[name.Name] = v
						}
					}
				}
			}
		}
	}
	return out, nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := unparen(e).(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func unparen(e ast.Expr) ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	start, end := fset.Position(e.Pos()), fset.Position(e.End())
	src, err := os.ReadFile(start.Filename)
	if err != nil || end.Offset > len(src) {
		return fmt.Sprintf("%T", e)
	}
	return string(src[start.Offset:end.Offset])
}

// paragraphs splits a comment into paragraphs, each on one line.
func paragraphs(cg *ast.CommentGroup) []string {
	if cg == nil {
		return nil
	}
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(cg.Text()), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			out = append(out, p)
		}
	}
	return out
}
