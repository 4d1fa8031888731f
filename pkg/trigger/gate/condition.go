package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// MaxConditionLength bounds a condition's text, in characters: a gate is a predicate a
// reader checks at a glance, and the parser's work grows with it.
const MaxConditionLength = 4096

// MaxConditionCost is the runtime cost (CEL's unit: about one per operation, more for
// operations over long strings and lists) past which an evaluation stops with an error,
// so that an expression that grows with a power of the objects (nested all(), map()
// building lists of lists, strings concatenated in a loop) fails instead of burning CPU
// and memory. One million is what Kubernetes allows one CEL expression of a CRD's
// validation rules or of an admission policy (celconfig.PerCallLimit). Real gates stay
// well below it: "at least 95 % of Nodes are Ready" over 5,000 Nodes of five conditions
// costs about 270,000.
//
// A larger limit would not stop a hostile expression soon: cel-go's cost tracking (as of
// v0.29) slows with the length of the evaluation, its stack of values growing by about
// one per iteration and searched at every step, so that three nested all() over 300
// objects take under a second to reach one million here, but two over 2,000 take 30 s
// to reach twelve million. The same makes the cost limit no bound on time: filter() with a
// constant predicate is charged almost nothing per iteration, yet slows as the others
// do. The deadline on Holds' context is the bound on time (DefaultConditionTimeout).
const MaxConditionCost = 1_000_000

// DefaultConditionTimeout bounds an evaluation whose context has no deadline. The
// caller should give one that suits how often it evaluates; this one only keeps a
// forgotten deadline from holding a worker for as long as a hostile expression runs.
// Cost tracking makes an evaluation over many objects slower than CEL alone (0.7 s for
// the 5,000 Nodes above, on a busy two-CPU machine), hence seconds rather than
// milliseconds.
const DefaultConditionTimeout = 5 * time.Second

// interruptCheckFrequency is how many comprehension iterations run between checks of the
// caller's context. An iteration costs at least a few hundred nanoseconds, and more as a
// long evaluation slows (see MaxConditionCost); a check costs a channel poll, so checking
// often costs nothing measurable and stops an evaluation soon after a deadline.
const interruptCheckFrequency = 10

// conditionEnv is the environment every condition compiles in, built once (building it
// declares the standard library, which costs more than compiling an expression).
//
// It declares the standard library only (with its macros all, exists, exists_one,
// filter and map). cel-go's ext.Strings is left out on purpose: its replace() multiplies
// a string's length by up to its argument's and is charged after it made the result, so
// that three chained calls within MaxConditionLength allocate gigabytes before the cost
// limit can stop them; the standard library grows a string or list by at most what it
// was already charged for.
var conditionEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(cel.Variable(objectsVariable, cel.ListType(cel.DynType)))
})

// objectsVariable names the list of objects a condition reads.
const objectsVariable = "objects"

// Condition is a compiled CEL expression over the variable `objects`, a list of the
// listed objects as JSON maps, that says whether the gate holds. It is safe for
// concurrent use.
type Condition struct {
	program cel.Program
	// defaultTimeout bounds an evaluation whose context has no deadline.
	defaultTimeout time.Duration
	// metadataOnly: the condition reads nothing of an object but its metadata.
	metadataOnly bool
}

// CompileCondition compiles expr. It refuses an expression longer than
// MaxConditionLength characters, one that does not compile, and one whose type is known
// and not bool; an expression of type dyn is checked when it is evaluated.
func CompileCondition(expr string) (*Condition, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("condition is empty")
	}
	if n := utf8.RuneCountInString(expr); n > MaxConditionLength {
		return nil, fmt.Errorf("condition is %d characters long, over the limit of %d", n, MaxConditionLength)
	}
	env, err := conditionEnv()
	if err != nil {
		return nil, fmt.Errorf("build the CEL environment: %w", err)
	}
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("condition does not compile: %s", truncate(iss.Err().Error(), maxErrorText))
	}
	if out := checked.OutputType(); !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("condition must give a bool, gives %s", out)
	}
	prg, err := env.Program(checked,
		cel.CostLimit(MaxConditionCost),
		cel.InterruptCheckFrequency(interruptCheckFrequency),
	)
	if err != nil {
		return nil, fmt.Errorf("condition does not compile: %s", truncate(err.Error(), maxErrorText))
	}
	return &Condition{program: prg, defaultTimeout: DefaultConditionTimeout,
		metadataOnly: readsOnlyMetadata(checked.NativeRep().Expr())}, nil
}

// MetadataOnly tells whether the condition reads nothing of an object but its metadata
// (and how many objects there are), so that the objects listed as metadata only
// (PartialObjectMetadata, as {"metadata": ...}) give the result whole objects would. It is
// decided on the checked expression (readsOnlyMetadata) and errs towards false.
func (c *Condition) MetadataOnly() bool { return c.metadataOnly }

// Holds evaluates the condition over objects (each an object as JSON maps, as
// unstructured.Unstructured holds it). An error, a missing field or the cost limit or
// ctx ending the evaluation, is returned as such: the caller decides whether a gate that
// cannot be evaluated holds (it should not). ctx should carry a deadline; without one
// the evaluation gets DefaultConditionTimeout.
func (c *Condition) Holds(ctx context.Context, objects []map[string]any) (bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.defaultTimeout,
			fmt.Errorf("over the default time limit of %s: %w", c.defaultTimeout, context.DeadlineExceeded))
		defer cancel()
	}
	if objects == nil {
		objects = []map[string]any{}
	}
	out, _, err := c.program.ContextEval(ctx, map[string]any{"objects": objects})
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return false, trimmed(fmt.Errorf("evaluate condition: cost over the limit of %d: %w", MaxConditionCost, err))
		}
		return false, trimmed(fmt.Errorf("evaluate condition: %w", err))
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("condition must give a bool, gives %s", out.Type().TypeName())
	}
	return bool(b), nil
}

// valueKind is what the metadata analysis knows of an expression's value.
type valueKind int

const (
	// otherValue holds nothing of an object but, at most, parts of its metadata.
	otherValue valueKind = iota
	// objectValue is one of the objects, whole.
	objectValue
	// objectListValue is a list of the objects, whole: `objects`, or a filter() of it.
	objectListValue
)

// metadataAnalysis follows where whole objects go in a checked condition. Its scope holds
// the comprehension variables in scope, innermost last.
type metadataAnalysis struct {
	scope []scopedVariable
}

type scopedVariable struct {
	name string
	kind valueKind
}

// readsOnlyMetadata tells whether expr, a checked condition, reads nothing of an object
// but its metadata. It follows whole objects from `objects` through indexing, the
// variables of comprehensions (all, exists, exists_one, map, filter) and the results of
// filter(), and accepts three uses of them only: selecting an object's metadata (or
// testing it with has()), counting a list of them (size) and iterating or indexing such a
// list. Any other use (an object compared, converted with dyn(), passed to a function,
// put in a list or a map, iterated over as a map) may read more, and gives false.
func readsOnlyMetadata(expr ast.Expr) bool {
	var a metadataAnalysis
	return a.allOther(expr)
}

// allOther tells whether every expression of exprs holds nothing of an object but
// metadata.
func (a *metadataAnalysis) allOther(exprs ...ast.Expr) bool {
	for _, e := range exprs {
		if kind, ok := a.kindOf(e); !ok || kind != otherValue {
			return false
		}
	}
	return true
}

// kindOf is what e's value is, and false when e uses an object beyond its metadata.
func (a *metadataAnalysis) kindOf(e ast.Expr) (valueKind, bool) {
	switch e.Kind() {
	case ast.LiteralKind:
		return otherValue, true
	case ast.IdentKind:
		return a.identKind(e.AsIdent()), true
	case ast.SelectKind:
		return a.selectKind(e.AsSelect())
	case ast.CallKind:
		return a.callKind(e.AsCall())
	case ast.ListKind:
		return otherValue, a.allOther(e.AsList().Elements()...)
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			if !a.allOther(entry.AsMapEntry().Key(), entry.AsMapEntry().Value()) {
				return otherValue, false
			}
		}
		return otherValue, true
	case ast.StructKind:
		for _, field := range e.AsStruct().Fields() {
			if !a.allOther(field.AsStructField().Value()) {
				return otherValue, false
			}
		}
		return otherValue, true
	case ast.ComprehensionKind:
		return a.comprehensionKind(e.AsComprehension())
	}
	// An expression kind this analysis does not know may read anything.
	return otherValue, false
}

// identKind is what the variable name holds: a comprehension variable in scope, else the
// global `objects` (a leading dot names a global only), else a type name or another
// global, none of which holds objects.
func (a *metadataAnalysis) identKind(name string) valueKind {
	if global, ok := strings.CutPrefix(name, "."); ok {
		return globalKind(global)
	}
	for i := len(a.scope) - 1; i >= 0; i-- {
		if a.scope[i].name == name {
			return a.scope[i].kind
		}
	}
	return globalKind(name)
}

func globalKind(name string) valueKind {
	if name == objectsVariable {
		return objectListValue
	}
	return otherValue
}

// selectKind accepts an object's metadata, and any field of what is not an object.
func (a *metadataAnalysis) selectKind(s ast.SelectExpr) (valueKind, bool) {
	kind, ok := a.kindOf(s.Operand())
	switch {
	case !ok:
		return otherValue, false
	case kind == objectValue:
		return otherValue, s.FieldName() == "metadata"
	case kind == objectListValue:
		return otherValue, false
	}
	return otherValue, true
}

// callKind accepts the size of a list of objects and an index into it (an object);
// every other call must be given nothing of an object but metadata.
func (a *metadataAnalysis) callKind(c ast.CallExpr) (valueKind, bool) {
	args := c.Args()
	if c.IsMemberFunction() {
		args = append([]ast.Expr{c.Target()}, args...)
	}
	switch {
	case c.FunctionName() == overloads.Size && len(args) == 1:
		// The size of an object (a map) counts its fields, which metadata alone lacks.
		kind, ok := a.kindOf(args[0])
		return otherValue, ok && kind != objectValue
	case c.FunctionName() == operators.Index && len(args) == 2:
		kind, ok := a.kindOf(args[0])
		if !ok || kind == objectValue || !a.allOther(args[1]) {
			return otherValue, false
		}
		if kind == objectListValue {
			return objectValue, true
		}
		return otherValue, true
	}
	return otherValue, a.allOther(args...)
}

// comprehensionKind follows objects through a comprehension: over a list of objects its
// iteration variable is an object; a filter() of them is a list of objects; any other
// comprehension must accumulate and give nothing of an object but metadata.
func (a *metadataAnalysis) comprehensionKind(c ast.ComprehensionExpr) (valueKind, bool) {
	rangeKind, ok := a.kindOf(c.IterRange())
	if !ok || rangeKind == objectValue || c.HasIterVar2() {
		// Iterating over an object iterates over its fields.
		return otherValue, false
	}
	iterKind := otherValue
	if rangeKind == objectListValue {
		iterKind = objectValue
	}
	if predicate, ok := filterPredicate(c); ok && rangeKind == objectListValue {
		a.push(scopedVariable{c.AccuVar(), objectListValue}, scopedVariable{c.IterVar(), objectValue})
		defer a.pop(2)
		return objectListValue, a.allOther(predicate)
	}
	if !a.allOther(c.AccuInit()) {
		return otherValue, false
	}
	a.push(scopedVariable{c.AccuVar(), otherValue}, scopedVariable{c.IterVar(), iterKind})
	ok = a.allOther(c.LoopCondition(), c.LoopStep())
	a.pop(1)
	ok = ok && a.allOther(c.Result())
	a.pop(1)
	return otherValue, ok
}

func (a *metadataAnalysis) push(vars ...scopedVariable) { a.scope = append(a.scope, vars...) }

func (a *metadataAnalysis) pop(n int) { a.scope = a.scope[:len(a.scope)-n] }

// filterPredicate is the predicate of c when c is what the filter() macro expands to,
//
//	accu = []; for iterVar in range: accu = predicate ? accu + [iterVar] : accu; accu
//
// whose result holds whole elements of its range.
func filterPredicate(c ast.ComprehensionExpr) (ast.Expr, bool) {
	isIdent := func(e ast.Expr, name string) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == name }
	init, cond, step := c.AccuInit(), c.LoopCondition(), c.LoopStep()
	if init.Kind() != ast.ListKind || init.AsList().Size() != 0 ||
		cond.Kind() != ast.LiteralKind || cond.AsLiteral() != types.True ||
		!isIdent(c.Result(), c.AccuVar()) ||
		step.Kind() != ast.CallKind || step.AsCall().FunctionName() != operators.Conditional {
		return nil, false
	}
	branches := step.AsCall().Args()
	if len(branches) != 3 || !isIdent(branches[2], c.AccuVar()) || branches[1].Kind() != ast.CallKind {
		return nil, false
	}
	add := branches[1].AsCall()
	if add.FunctionName() != operators.Add || len(add.Args()) != 2 || !isIdent(add.Args()[0], c.AccuVar()) {
		return nil, false
	}
	kept := add.Args()[1]
	if kept.Kind() != ast.ListKind || kept.AsList().Size() != 1 || !isIdent(kept.AsList().Elements()[0], c.IterVar()) {
		return nil, false
	}
	return branches[0], true
}
