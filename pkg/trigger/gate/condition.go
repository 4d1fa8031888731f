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
	return cel.NewEnv(cel.Variable("objects", cel.ListType(cel.DynType)))
})

// Condition is a compiled CEL expression over the variable `objects`, a list of the
// listed objects as JSON maps, that says whether the gate holds. It is safe for
// concurrent use.
type Condition struct {
	program cel.Program
	// defaultTimeout bounds an evaluation whose context has no deadline.
	defaultTimeout time.Duration
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
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("condition does not compile: %s", truncate(iss.Err().Error(), maxErrorText))
	}
	if out := ast.OutputType(); !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("condition must give a bool, gives %s", out)
	}
	prg, err := env.Program(ast,
		cel.CostLimit(MaxConditionCost),
		cel.InterruptCheckFrequency(interruptCheckFrequency),
	)
	if err != nil {
		return nil, fmt.Errorf("condition does not compile: %s", truncate(err.Error(), maxErrorText))
	}
	return &Condition{program: prg, defaultTimeout: DefaultConditionTimeout}, nil
}

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
