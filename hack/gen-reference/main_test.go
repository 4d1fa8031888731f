package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// root is the module's root, from this package's directory.
const root = "../.."

func TestParseDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("name", "stepwise-operator", "Name of the thing.")
	fs.String("empty", "", "Empty: none.")
	fs.Int("workers", 8, "Workers (at least 1).")
	fs.Int("share", 0, "0: half of --workers.")
	fs.Bool("on", true, "Turned on (default behaviour).")
	fs.Bool("off", false, "Turned off.")
	fs.Duration("period", 10*time.Minute, "How often.")
	fs.Float64("qps", 200, "Requests per second.")
	fs.Func("repeat", "Repeatable: NAME=FILE.", func(string) error { return nil })
	fs.Bool("x", false, "A one-letter bool.")
	fs.String("lines", "a", "First line\nsecond line.")
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = func() {
		_, _ = out.WriteString("Usage: x [flags]\n\nDoes things.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.Usage()

	got, err := parseDefaults(out.String())
	require.NoError(t, err)
	assert.Equal(t, []flagDoc{
		{Name: "empty", Type: "string", Usage: "Empty: none."},
		{Name: "lines", Type: "string", Usage: "First line\nsecond line.", Default: "a"},
		{Name: "name", Type: "string", Usage: "Name of the thing.", Default: "stepwise-operator"},
		{Name: "off", Usage: "Turned off.", Default: "false"},
		{Name: "on", Usage: "Turned on (default behaviour).", Default: "true"},
		{Name: "period", Type: "duration", Usage: "How often.", Default: "10m0s"},
		{Name: "qps", Type: "float", Usage: "Requests per second.", Default: "200"},
		{Name: "repeat", Type: "value", Usage: "Repeatable: NAME=FILE."},
		{Name: "share", Type: "int", Usage: "0: half of --workers.", Default: "0"},
		{Name: "workers", Type: "int", Usage: "Workers (at least 1).", Default: "8"},
		{Name: "x", Usage: "A one-letter bool.", Default: "false"},
	}, got)
}

func TestParseDefaultsRefusesWhatItDoesNotKnow(t *testing.T) {
	_, err := parseDefaults("  -a string\n    \tA.\nsomething else\n")
	assert.ErrorContains(t, err, "something else")
}

func TestLoggingFlagsAreTold(t *testing.T) {
	names := loggingFlags()
	assert.True(t, names["v"])
	assert.True(t, names["vmodule"])
	assert.True(t, names["logging-format"])
	assert.True(t, names["log-json-split-stream"], "the JSON format's own flags are logging flags")
	assert.False(t, names["workers"])
}

func TestExecutorsPage(t *testing.T) {
	page, err := renderExecutors(root)
	require.NoError(t, err)
	text := string(page)
	var all []executor.TaskExecutor
	for _, g := range append(builtin, testExecutors) {
		all = append(all, g.executors()...)
	}
	require.NotEmpty(t, all)
	for _, e := range all {
		assert.Contains(t, text, "### `"+e.Name()+"`\n")
		for _, p := range executor.Describe(e).Parameters {
			assert.Contains(t, text, "| `"+p.Name+"` | "+string(p.Type)+" |", "%s %s", e.Name(), p.Name)
		}
	}
	assert.Contains(t, text, "| `policy` | enum |  | `Fail` | `Fail`, `Force` |")
}

// The generator's list of built-in packages is what the operator registers.
func TestBuiltinExecutorsAreTheOperators(t *testing.T) {
	pkgs, err := registeredPackages(filepath.Join(root, "cmd", "stepwise-operator", "executors.go"), builtinFunc)
	require.NoError(t, err)
	assert.Equal(t, []string{"node", "k8s"}, pkgs)

	other := t.TempDir()
	dir := filepath.Join(other, "cmd", "stepwise-operator")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "executors.go"), []byte(`package main

func builtinExecutors() []executor.TaskExecutor {
	return append(append(node.Executors(nil), k8s.Executors()...), cloud.Executors()...)
}
`), 0o644))
	_, err = renderExecutors(other)
	assert.ErrorContains(t, err, "[node k8s cloud]")
}

func TestComplete(t *testing.T) {
	assert.True(t, complete([]contract.Parameter{{Name: "a", Type: contract.ParamString}}))
	assert.False(t, complete([]contract.Parameter{{Name: "a", Type: contract.ParamString}, {Name: "b"}}))
}

func TestReasonsPage(t *testing.T) {
	page, err := renderReasons(root)
	require.NoError(t, err)
	text := string(page)
	for name, value := range map[string]string{
		"ReasonUndecodable":             v1alpha1.ReasonUndecodable,
		"ReasonSucceeded":               v1alpha1.ReasonSucceeded,
		"ReasonTornDownAfterFailure":    v1alpha1.ReasonTornDownAfterFailure,
		"TriggerReasonActive":           v1alpha1.TriggerReasonActive,
		"TriggerReasonForbidden":        v1alpha1.TriggerReasonForbidden,
		"TriggerReasonWaiting":          v1alpha1.TriggerReasonWaiting,
		"ReasonHookCallTimeout":         contract.ReasonHookCallTimeout,
		"ReasonInvalidParameter":        contract.ReasonInvalidParameter,
		"ReasonTearingDownAfterFailure": v1alpha1.ReasonTearingDownAfterFailure,
	} {
		assert.Contains(t, text, "| `"+value+"` | `"+name+"` |", name)
	}
	// A paragraph of a constant's comment before its last introduces a table.
	assert.Contains(t, text, "\nReady=True.\n\n| reason | constant | meaning |\n")
	assert.Contains(t, text, "| `Active` | `TriggerReasonActive` | the trigger starts pipelines for the objects that match. |")
	// Events: literal reasons, the engine's queued Events, and the trigger's wrappers.
	assert.Contains(t, text, "| `StepStarted` | Normal | `Step %q started (%s)` | step.go |")
	assert.Contains(t, text, "| `StepFailed` | Warning | `Step %q failed: %s` | step.go |")
	assert.Contains(t, text, "| `SpecChangeRefused` | Warning |")
	assert.Contains(t, text, "| `Waiting` | Normal | `objects wait: the trigger is suspended; first %s` | mode.go |")
	assert.Contains(t, text, "| `Waiting` | Warning | `%s waits: %v` | create.go |")
	assert.NotContains(t, text, "emitEvents")
}

// writePackage writes Go files into dir.
func writePackage(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
}

func TestPackageEvents(t *testing.T) {
	base := t.TempDir()
	writePackage(t, filepath.Join(base, "apis", "stepwise", "v1alpha1"), map[string]string{
		"reasons.go": "package v1alpha1\n\nconst ReasonDone = \"Done\"\n",
	})
	dir := filepath.Join(base, "x")
	writePackage(t, dir, map[string]string{
		"x.go": `package x

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

const reasonLocal = "Local"

type s struct{ recorder recorder }

// event records on the object; a wrapper (its parameters are passed on).
func (s *s) event(eventType, reason, format string, args ...any) {
	s.recorder.Event(nil, eventType, reason, fmt.Sprintf(format, args...))
}

// waiting is a wrapper of event with a fixed reason.
func (s *s) waiting(obj any, eventType, format string, args ...any) {
	s.event(eventType, "Waiting", format, args...)
}

func (s *s) sync() {
	s.event(corev1.EventTypeNormal, v1alpha1.ReasonDone, "done %s", "x")
	s.waiting(nil, corev1.EventTypeWarning, "waits: %v", 1)
	s.recorder.Eventf(nil, corev1.EventTypeNormal, reasonLocal, "local")
	s.record(literal(1))
	s.record(stepped(v1alpha1.ReasonDone, "a"))
	s.record(normal("InPlace", "made in place"))
}

func (s *s) flush(e struct{ eventType, reason string }) {
	s.recorder.Eventf(nil, e.eventType, e.reason, "%s", "queued")
}
`,
		"events.go": `package x

type event struct{ eventType, reason, message string }

// normal and warning make Events.
func normal(reason, format string, args ...any) event { return event{"Normal", reason, format} }

func warning(reason, format string, args ...any) event { return event{"Warning", reason, format} }

// literal is a constructor: the Event is recorded where it is called.
func literal(n int) event { return normal("Literal", "literal %d", n) }

// stepped is a constructor that takes its reason.
func stepped(reason, step string) event { return warning(reason, "step %q", step) }

func (s *s) record(e event) {}

func (s *s) emit(e event) { s.recorder.Eventf(nil, e.eventType, e.reason, "%s", e.message) }

// literal the method is not the constructor.
func (s *s) literal() int { return 0 }

func (s *s) count() int { return s.literal() }
`,
		"x_test.go": "package x\n\nfunc t() { s.record(normal(\"FromATest\", \"no\")) }\n",
	})
	events, err := packageEvents(dir)
	require.NoError(t, err)
	assert.Equal(t, []event{
		{Type: "Normal", Reason: "Done", Message: "done %s", File: "x.go"},
		{Type: "Warning", Reason: "Done", Message: "step %q", File: "x.go"},
		{Type: "Normal", Reason: "InPlace", Message: "made in place", File: "x.go"},
		{Type: "Normal", Reason: "Literal", Message: "literal %d", File: "x.go"},
		{Type: "Normal", Reason: "Local", Message: "local", File: "x.go"},
		{Type: "Warning", Reason: "Waiting", Message: "waits: %v", File: "x.go"},
	}, events)

	// A constructor makes one Event, which something records.
	writePackage(t, dir, map[string]string{
		"z.go": "package x\n\nfunc either(b bool) event {\n\tif b {\n\t\treturn normal(\"A\", \"a\")\n\t}\n\treturn normal(\"B\", \"b\")\n}\n",
	})
	_, err = packageEvents(dir)
	assert.ErrorContains(t, err, "z.go:7: either returns more than one Event")
	writePackage(t, dir, map[string]string{"z.go": "package x\n\nfunc unused() event { return warning(\"Unused\", \"u\") }\n"})
	_, err = packageEvents(dir)
	assert.ErrorContains(t, err, "z.go:3: nothing records the Event unused makes")
	require.NoError(t, os.Remove(filepath.Join(dir, "z.go")))

	writePackage(t, dir, map[string]string{
		"y.go": "package x\n\nfunc (s *s) other(r string) { r2 := r + \"x\"; s.recorder.Eventf(nil, corev1.EventTypeNormal, r2, \"m\") }\n",
	})
	_, err = packageEvents(dir)
	assert.ErrorContains(t, err, "y.go:3: cannot tell the Event's reason from r2")
}

func TestConstGroups(t *testing.T) {
	dir := t.TempDir()
	writePackage(t, dir, map[string]string{
		"a.go": `package a

// Reasons of a thing. More about them.
const (
	// ReasonOne: the first.
	ReasonOne = "One"
	NotAReason = "x"

	// Below.
	//
	// ReasonTwo is the second.
	ReasonTwo = "Two"
)

// reasonThree is alone.
const reasonThree = "Three"
`,
		"b.go": "package a\n\n// reasonFour is alone too.\nconst reasonFour = \"Four\"\n",
	})
	groups, err := constGroups(dir, regexp.MustCompile(`^[Rr]eason[A-Z]`))
	require.NoError(t, err)
	require.Len(t, groups, 2)
	assert.Equal(t, "a.go, b.go", groups[1].File)

	var b bytes.Buffer
	for _, g := range groups {
		writeConstGroup(&b, "pkg/a", g)
	}
	assert.Equal(t, "### Reasons of a thing\n\n(`pkg/a`, a.go) More about them.\n\n"+
		"| reason | constant | meaning |\n|---|---|---|\n"+
		"| `One` | `ReasonOne` | the first. |\n\n"+
		"Below.\n\n"+
		"| reason | constant | meaning |\n|---|---|---|\n"+
		"| `Two` | `ReasonTwo` | ReasonTwo is the second. |\n\n"+
		"### Other reasons in pkg/a\n\n(`pkg/a`, a.go, b.go)\n\n"+
		"| reason | constant | meaning |\n|---|---|---|\n"+
		"| `Three` | `reasonThree` | reasonThree is alone. |\n"+
		"| `Four` | `reasonFour` | reasonFour is alone too. |\n\n", b.String())
}

func TestCell(t *testing.T) {
	assert.Equal(t, `a \| b &lt;dir&gt;/x plugin-\* c`, cell("a | b <dir>/x\n   plugin-* c"))
	assert.Equal(t, "`a\\|b`", code("a|b"))
	assert.Equal(t, "``a`b``", code("a`b"))
	assert.Equal(t, "", code(""))
}

// The committed pages are what the generator writes, but for the flags, which need the
// operator built (hack/verify-reference.sh checks them all).
func TestCommittedPagesAreCurrent(t *testing.T) {
	for _, p := range pages {
		if p.name == "operator-flags.md" {
			continue
		}
		want, err := p.render(root)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(root, "docs", "reference", p.name))
		require.NoError(t, err)
		assert.Equal(t, header+string(want), string(got), "docs/reference/%s is stale: run make reference", p.name)
	}
}
