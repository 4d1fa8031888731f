package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// planLabel marks the dry-run pipelines plan makes, so that one left behind (a killed
// command, --keep) is easy to find: kubectl get swp -l stepwise.dev/plan=true.
const planLabel = "stepwise.dev/plan"

const (
	defaultPlanTimeout = 2 * time.Minute
	defaultPlanMax     = 5
	// cleanupTimeout bounds the deletion of the dry-run pipelines, which runs even once the
	// command's context has ended (Ctrl-C, --timeout).
	cleanupTimeout = 30 * time.Second
)

// planOptions are plan's flags.
type planOptions struct {
	*options
	file, template, trigger string
	pairs                   []string
	serviceAccount          string
	max                     int
	timeout                 time.Duration
	keep                    bool
	output                  string
}

func newPlanCommand(o *options) *cobra.Command {
	po := &planOptions{options: o}
	cmd := &cobra.Command{
		Use:   "plan (-f FILE | --template TEMPLATE [-p NAME=VALUE...] | --trigger TRIGGER)",
		Short: "Show what a pipeline would do, step by step, without doing it",
		Long: `Plan before you run: show what a pipeline would do, step by step, without doing it.

plan creates a dry-run Pipeline (spec.dryRun: true, named plan-NAME-xxxxx, labelled
` + planLabel + `=true). The operator asks each step's executor, in order, what it would do,
from the cluster as it is now and acting as the pipeline's ServiceAccount, and touches
nothing. plan waits for the answer, prints each step's plan (its summary, the things it would
touch with what it would do to them, and its warnings, marked !), and deletes the dry-run
pipeline; deleting it tears nothing down. With --keep the pipeline stays, for kubectl
stepwise status or -o yaml.

What to plan:
  -f FILE            a Pipeline manifest, YAML or JSON (- for stdin), in its namespace or -n's
  --template NAME    a pipeline of a PipelineTemplate with -p parameters, as run creates
  --trigger NAME     what a PipelineTrigger would start: the objects of its kind that match
                     it and have no pipeline yet, in the order it starts them (oldest first),
                     each with the trigger's params bound to it; the first --max are planned.
                     Objects are read with your credentials. A waiting object is planned
                     against the cluster as it is now, not as it will be when its turn comes.

A plan fails where a run would: parameters that do not fit the template, an unknown
executor, a step the ServiceAccount may not perform. Exit codes: 0 planned, 2 a plan failed
(the failed step's message is printed), 1 an error (including --timeout).`,
		Example: `  # What would this manifest do?
  kubectl stepwise plan -f retire-node.yaml

  # A template with parameters, as JSON for a script
  kubectl stepwise plan --template retire-node -n node-ops -p node=worker-3 -o json

  # What would the trigger start now, and what waits?
  kubectl stepwise plan --trigger retire-labelled -n node-ops --max 3

  # Keep the dry-run pipeline to look at it afterwards
  kubectl stepwise plan -f pipeline.yaml --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := po.check(cmd); err != nil {
				return err
			}
			switch {
			case po.trigger != "":
				return po.planTrigger(cmd.Context())
			case po.template != "":
				return po.planTemplate(cmd.Context())
			}
			return po.planFile(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&po.file, "filename", "f", "", "A Pipeline manifest to plan, YAML or JSON; - reads stdin.")
	f.StringVar(&po.template, "template", "", "Plan a pipeline of this PipelineTemplate.")
	f.StringArrayVarP(&po.pairs, "param", "p", nil, "With --template, a parameter, NAME=VALUE; repeat for each.")
	f.StringVar(&po.serviceAccount, "service-account", "", "With --template, the ServiceAccount the plan acts as. Default: the namespace's default.")
	f.StringVar(&po.trigger, "trigger", "", "Plan what this PipelineTrigger would start.")
	f.IntVar(&po.max, "max", defaultPlanMax, "With --trigger, how many of the waiting objects to plan, in order.")
	f.DurationVar(&po.timeout, "timeout", defaultPlanTimeout, "How long to wait for the plans.")
	f.BoolVar(&po.keep, "keep", false, "Keep the dry-run pipelines instead of deleting them, and print their names.")
	f.StringVarP(&po.output, "output", "o", "", "Output format: json or yaml. Default: a table of each step's plan.")
	cmd.MarkFlagsOneRequired("filename", "template", "trigger")
	cmd.MarkFlagsMutuallyExclusive("filename", "template", "trigger")
	return cmd
}

// check refuses flags that do not go together; cobra already saw to the one source.
func (po *planOptions) check(cmd *cobra.Command) error {
	if err := checkOutput(po.output); err != nil {
		return err
	}
	if po.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", po.timeout)
	}
	if po.template == "" && (len(po.pairs) > 0 || po.serviceAccount != "") {
		return errors.New("--param and --service-account go with --template")
	}
	if po.trigger == "" && cmd.Flags().Changed("max") {
		return errors.New("--max goes with --trigger")
	}
	if po.max < 1 {
		return fmt.Errorf("--max must be at least 1, got %d", po.max)
	}
	return nil
}

// planFile plans the pipeline of a manifest.
func (po *planOptions) planFile(ctx context.Context) error {
	p, err := readPipelineManifest(po.file, po.streams.In)
	if err != nil {
		return err
	}
	ns, err := po.namespace()
	if err != nil {
		return err
	}
	if p.Namespace != "" {
		// As kubectl apply: the manifest's namespace, unless -n says another.
		if flagNS := po.configFlags.Namespace; flagNS != nil && *flagNS != "" && *flagNS != p.Namespace {
			return fmt.Errorf("the namespace of %s (%s) does not match --namespace (%s)", po.file, p.Namespace, *flagNS)
		}
		ns = p.Namespace
	}
	c, err := po.clients()
	if err != nil {
		return err
	}
	name := p.Name
	if name == "" {
		name = strings.TrimSuffix(p.GenerateName, "-")
	}
	return po.planOne(ctx, c, ns, "Plan of pipeline "+ns+"/"+orDash(name), dryRunOf(p, name))
}

// planTemplate plans a pipeline of a template, as run would create it.
func (po *planOptions) planTemplate(ctx context.Context) error {
	params, err := parseParams(po.pairs)
	if err != nil {
		return err
	}
	ns, err := po.namespace()
	if err != nil {
		return err
	}
	c, err := po.clients()
	if err != nil {
		return err
	}
	// A missing template is no failure for a real pipeline, which waits for it; a plan
	// would wait until --timeout.
	if _, err := c.Stepwise.StepwiseV1alpha1().PipelineTemplates(ns).Get(ctx, po.template, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get template %s/%s: %w", ns, po.template, err)
	}
	p := &v1alpha1.Pipeline{Spec: v1alpha1.PipelineSpec{
		TemplateRef:        &v1alpha1.TemplateRef{Name: po.template},
		Params:             params,
		ServiceAccountName: po.serviceAccount,
	}}
	return po.planOne(ctx, c, ns, "Plan of template "+ns+"/"+po.template, dryRunOf(p, po.template))
}

// planOne plans one dry-run pipeline and prints its plan.
func (po *planOptions) planOne(ctx context.Context, c *Clients, ns, title string, p *v1alpha1.Pipeline) error {
	pl := &planner{cs: c.Stepwise, ns: ns, keep: po.keep}
	defer po.cleanup(ctx, pl)
	results, err := pl.plan(ctx, []*v1alpha1.Pipeline{p}, po.timeout)
	if err != nil {
		return err
	}
	res := results[0]
	if po.output != "" {
		if err := po.encode(reportOf(res, po.keep)); err != nil {
			return err
		}
	} else if err := PrintPlan(po.streams.Out, title, res); err != nil {
		return err
	}
	if res.Failed() {
		return errPipelineFailed
	}
	return nil
}

// encode writes -o json or -o yaml.
func (po *planOptions) encode(obj any) error {
	data, err := encodeOutput(obj, po.output)
	if err != nil {
		return fmt.Errorf("encode the plan: %w", err)
	}
	if _, err := po.streams.Out.Write(data); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	return nil
}

// cleanup deletes the dry-run pipelines, or names them with --keep: on stdout after a
// table, on stderr when stdout holds a JSON or YAML document.
func (po *planOptions) cleanup(ctx context.Context, pl *planner) {
	w := po.streams.Out
	if po.output != "" {
		w = po.streams.ErrOut
	}
	pl.cleanup(ctx, w, po.streams.ErrOut)
}

// readPipelineManifest reads the one Pipeline of a YAML or JSON file, or of stdin for "-".
// Unknown fields are refused, as kubectl's strict field validation would: a misspelt field
// would otherwise be planned as absent.
func readPipelineManifest(path string, stdin io.Reader) (*v1alpha1.Pipeline, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if m != nil { // not an empty document, or comments only
			docs = append(docs, doc)
		}
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s holds %d objects: plan takes one Pipeline", path, len(docs))
	}
	var p v1alpha1.Pipeline
	if err := yaml.UnmarshalStrict(docs[0], &p); err != nil {
		return nil, fmt.Errorf("decode the Pipeline of %s: %w", path, err)
	}
	if gvk := p.GroupVersionKind(); gvk != v1alpha1.SchemeGroupVersion.WithKind("Pipeline") {
		return nil, fmt.Errorf("%s holds a %s %s, not a %s Pipeline", path, orDash(p.APIVersion), orDash(p.Kind), v1alpha1.SchemeGroupVersion)
	}
	return &p, nil
}

// dryRunOf is the dry-run pipeline that plans p's spec: dryRun on, not suspended, named
// plan-NAME-xxxxx by the API server and labelled as a plan. It takes none of p's metadata:
// a trigger's labels would count it as the trigger's pipeline, an owner could collect it,
// and the retry annotation would mean nothing to it. It plans as the pipeline p names
// (stepwise.dev/plan-as): what an edit of that pipeline would change.
func dryRunOf(p *v1alpha1.Pipeline, name string) *v1alpha1.Pipeline {
	spec := *p.Spec.DeepCopy()
	spec.DryRun, spec.Suspend = true, false
	prefix := "plan-" + name
	if len(prefix) > 57 {
		prefix = prefix[:57] // the API server adds 5 characters; names stay under 63
	}
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: strings.TrimRight(prefix, "-.") + "-",
			Labels:       map[string]string{planLabel: "true"},
			Annotations:  planAs(p.Name),
		},
		Spec: spec,
	}
}

// planAs is the annotation that makes a dry run plan as the pipeline name; none for a
// manifest with only a generateName.
func planAs(name string) map[string]string {
	if name == "" {
		return nil
	}
	return map[string]string{v1alpha1.PlanAsAnnotation: name}
}

// planner creates dry-run pipelines, waits for their plans, and deletes them.
type planner struct {
	cs   clientset.Interface
	ns   string
	keep bool
	// created are the dry-run pipelines made so far, for cleanup.
	created []*v1alpha1.Pipeline
}

// plan creates the dry-run pipelines and returns them once each is Planned or Failed, within
// timeout. Whatever it created is for cleanup, also when it fails.
func (pl *planner) plan(ctx context.Context, pipelines []*v1alpha1.Pipeline, timeout time.Duration) ([]*v1alpha1.Pipeline, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := pl.cs.StepwiseV1alpha1().Pipelines(pl.ns)
	for _, p := range pipelines {
		p = p.DeepCopy()
		p.Namespace = pl.ns
		// Strict: an API server whose CRD predates spec.dryRun refuses it rather than drop
		// it, which would run the pipeline for real.
		created, err := client.Create(ctx, p, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			return nil, fmt.Errorf("create a dry-run pipeline in %s: %w", pl.ns, err)
		}
		pl.created = append(pl.created, created)
		if !created.Spec.DryRun {
			return nil, fmt.Errorf("the API server dropped spec.dryRun of pipeline %s/%s: its Pipeline CRD predates dry runs (upgrade Stepwise)", pl.ns, created.Name)
		}
	}
	results, err := pl.wait(ctx)
	if err != nil && ctx.Err() != nil {
		// The watch ends with "timed out waiting for the condition" either way; say which
		// pipeline is not planned yet, and why the wait ended.
		for _, p := range results {
			if planDone(p) {
				continue
			}
			phase := p.Status.Phase
			if phase == "" {
				phase = v1alpha1.PipelinePending
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("no plan after %s: dry-run pipeline %s/%s is still %s (is the operator running, and recent enough to plan?)",
					timeout, pl.ns, p.Name, oneLine(string(phase), 0))
			}
			return nil, fmt.Errorf("interrupted while dry-run pipeline %s/%s is %s: %w", pl.ns, p.Name, oneLine(string(phase), 0), ctx.Err())
		}
	}
	if err != nil {
		return nil, err
	}
	return results, nil
}

// wait follows the created pipelines with an informer (it re-lists after errors) until each
// is Planned or Failed, and returns them as last seen, in order.
func (pl *planner) wait(ctx context.Context) ([]*v1alpha1.Pipeline, error) {
	client := pl.cs.StepwiseV1alpha1().Pipelines(pl.ns)
	selector := planLabel + "=true"
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return client.Watch(ctx, opts)
		},
	}, pl.cs)
	last := slices.Clone(pl.created)
	index := make(map[string]int, len(last))
	for i, p := range last {
		index[p.Name] = i
	}
	gone := func(name string) error {
		return fmt.Errorf("dry-run pipeline %s/%s was deleted before it was planned", pl.ns, name)
	}
	exists := func(store cache.Store) (bool, error) {
		for _, p := range pl.created {
			_, ok, err := store.GetByKey(pl.ns + "/" + p.Name)
			if err != nil {
				return false, err
			}
			if !ok {
				return false, gone(p.Name)
			}
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &v1alpha1.Pipeline{}, exists, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*v1alpha1.Pipeline)
		if !ok {
			return false, nil
		}
		i, mine := index[p.Name]
		if !mine { // someone else's plan
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, gone(p.Name)
		}
		last[i] = p
		if err := planProblem(p); err != nil {
			return false, err
		}
		return !slices.ContainsFunc(last, func(p *v1alpha1.Pipeline) bool { return !planDone(p) }), nil
	})
	return last, err
}

// planDone tells whether the operator has answered: the dry run is Planned or Failed for
// its current spec.
func planDone(p *v1alpha1.Pipeline) bool {
	return Settled(p) && (p.Status.Phase == v1alpha1.PipelinePlanned || p.Failed())
}

// planProblem is why a dry run will never be planned: the operator ran it (it predates
// spec.dryRun), or its template does not exist (a pipeline waits for its template).
func planProblem(p *v1alpha1.Pipeline) error {
	for _, s := range p.Status.Steps {
		if s.Ran != nil {
			return fmt.Errorf("the operator ran step %s of dry-run pipeline %s/%s instead of planning it: it predates dry runs (upgrade Stepwise)",
				oneLine(s.Name, 0), p.Namespace, p.Name)
		}
	}
	if p.Status.Phase == v1alpha1.PipelineSucceeded {
		return fmt.Errorf("the operator ran dry-run pipeline %s/%s instead of planning it: it predates dry runs (upgrade Stepwise)", p.Namespace, p.Name)
	}
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil &&
		ready.Reason == v1alpha1.ReasonTemplateNotFound && Settled(p) {
		return fmt.Errorf("dry-run pipeline %s/%s: %s", p.Namespace, p.Name, oneLine(ready.Message, 0))
	}
	return nil
}

// cleanup deletes the created pipelines, or with keep names them on w; it reports on errOut
// what it could not delete. It runs after the command's context ended too.
func (pl *planner) cleanup(ctx context.Context, w, errOut io.Writer) {
	if pl.keep {
		for _, p := range pl.created {
			_, _ = fmt.Fprintf(w, "pipeline.stepwise.dev/%s kept in %s (a dry run: deleting it tears nothing down)\n", oneLine(p.Name, 0), pl.ns)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	client := pl.cs.StepwiseV1alpha1().Pipelines(pl.ns)
	for _, p := range pl.created {
		opts := metav1.DeleteOptions{}
		if p.UID != "" {
			opts.Preconditions = &metav1.Preconditions{UID: &p.UID}
		}
		if err := client.Delete(ctx, p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			_, _ = fmt.Fprintf(errOut, "warning: delete dry-run pipeline %s/%s: %s\n", pl.ns, oneLine(p.Name, 0), oneLine(err.Error(), 0))
		}
	}
}

// planReport is a dry run's plan for -o json and -o yaml.
type planReport struct {
	// DryRun names the dry-run Pipeline that made the plan; it is deleted unless Kept.
	DryRun    string                 `json:"dryRun"`
	Namespace string                 `json:"namespace"`
	Kept      bool                   `json:"kept"`
	Phase     v1alpha1.PipelinePhase `json:"phase"`
	// Reason and Message are the pipeline's Ready condition's.
	Reason  string       `json:"reason,omitempty"`
	Message string       `json:"message,omitempty"`
	Steps   []stepReport `json:"steps"`
}

// stepReport is one step's part of a planReport.
type stepReport struct {
	Name     string             `json:"name"`
	Executor string             `json:"executor,omitempty"`
	Phase    v1alpha1.StepPhase `json:"phase,omitempty"`
	Plan     *v1alpha1.StepPlan `json:"plan,omitempty"`
	// Outputs are what the step would output, for the steps after it.
	Outputs map[string]string `json:"outputs,omitempty"`
	Message string            `json:"message,omitempty"`
}

func reportOf(p *v1alpha1.Pipeline, kept bool) planReport {
	r := planReport{DryRun: p.Name, Namespace: p.Namespace, Kept: kept, Phase: p.Status.Phase, Steps: []stepReport{}}
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
		r.Reason, r.Message = ready.Reason, ready.Message
	}
	for _, s := range planSteps(p) {
		sr := stepReport{Name: s.name, Executor: s.executor}
		if st := s.status; st != nil {
			sr.Phase, sr.Plan, sr.Outputs, sr.Message = st.Phase, st.Plan, st.Outputs, st.Message
		}
		r.Steps = append(r.Steps, sr)
	}
	return r
}

// plannedStep is a step of a dry run with its status, if it has one yet.
type plannedStep struct {
	name, executor string
	status         *v1alpha1.StepStatus
}

// planSteps are the steps of a dry run in order: those of its spec, or of its template as
// the operator took it; with no template taken (a failure before), those of the status.
func planSteps(p *v1alpha1.Pipeline) []plannedStep {
	steps := p.Spec.Steps
	if len(steps) == 0 && p.Status.Template != nil {
		steps = p.Status.Template.Steps
	}
	byName := map[string]*v1alpha1.StepStatus{}
	for i := range p.Status.Steps {
		byName[p.Status.Steps[i].Name] = &p.Status.Steps[i]
	}
	var out []plannedStep
	for _, s := range steps {
		ps := plannedStep{name: s.Name, executor: s.Executor, status: byName[s.Name]}
		if ps.status != nil && ps.status.Executor != "" {
			ps.executor = ps.status.Executor
		}
		out = append(out, ps)
	}
	if len(steps) == 0 {
		for i := range p.Status.Steps {
			s := &p.Status.Steps[i]
			out = append(out, plannedStep{name: s.Name, executor: s.Executor, status: s})
		}
	}
	return out
}

// PrintPlan writes a dry run's plan under title: a line on the whole, then a table of its
// steps, each followed by what it would touch (KIND NAME ACTION NOTE), its warnings (!) and
// its would-be outputs; then, when the plan failed, why.
func PrintPlan(w io.Writer, title string, p *v1alpha1.Pipeline) error {
	return printPlan(w, title, nil, p)
}

// printPlan is PrintPlan with lines of its own under the title. Every value from the cluster
// goes through oneLine.
func printPlan(w io.Writer, title string, notes []string, p *v1alpha1.Pipeline) error {
	var b strings.Builder
	b.WriteString(oneLine(title+": "+planOutcome(p), 0) + "\n")
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	steps := planSteps(p)
	rows := [][]string{{"STEP", "EXECUTOR", "SUMMARY"}}
	for _, s := range steps {
		rows = append(rows, []string{s.name, orDash(s.executor), stepSummary(s.status)})
	}
	head := tabLines(rows, "")
	b.WriteString(head[0] + "\n")
	for i, s := range steps {
		b.WriteString(head[i+1] + "\n")
		if s.status == nil {
			continue
		}
		if plan := s.status.Plan; plan != nil {
			if len(plan.Details) > 0 {
				rows := [][]string{{"KIND", "NAME", "ACTION", "NOTE"}}
				for _, d := range plan.Details {
					rows = append(rows, []string{orDash(d.Kind), orDash(d.Name), orDash(d.Action), d.Note})
				}
				for _, line := range tabLines(rows, "    ") {
					b.WriteString(line + "\n")
				}
			}
			for _, warning := range plan.Warnings {
				b.WriteString("    ! " + oneLine(warning, 0) + "\n")
			}
		}
		if len(s.status.Outputs) > 0 {
			outputs := make([]string, 0, len(s.status.Outputs))
			for _, k := range slices.Sorted(maps.Keys(s.status.Outputs)) {
				outputs = append(outputs, oneLine(k, 0)+"="+oneLine(s.status.Outputs[k], 0))
			}
			b.WriteString("    outputs: " + strings.Join(outputs, ", ") + "\n")
		}
	}
	if p.Failed() {
		why := "the operator gave no reason"
		if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			why = oneLine(ready.Reason, 0) + ": " + oneLine(ready.Message, 0)
		}
		b.WriteString("Failed: " + why + "\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	return nil
}

// planOutcome says in a few words how a dry run ended.
func planOutcome(p *v1alpha1.Pipeline) string {
	switch {
	case p.Failed() && p.Status.CurrentStep != "":
		return "Failed at step " + p.Status.CurrentStep
	case p.Failed():
		return "Failed"
	case p.Status.Phase != v1alpha1.PipelinePlanned:
		return orDash(string(p.Status.Phase))
	}
	steps, warnings := 0, 0
	for _, s := range p.Status.Steps {
		if s.Phase == v1alpha1.StepPlanned {
			steps++
		}
		if s.Plan != nil {
			warnings += len(s.Plan.Warnings)
		}
	}
	return fmt.Sprintf("Planned, %s, %s", plural(steps, "step"), plural(warnings, "warning"))
}

// stepSummary is the SUMMARY cell of a step.
func stepSummary(s *v1alpha1.StepStatus) string {
	switch {
	case s == nil:
		return "(not planned)"
	case s.Phase == v1alpha1.StepFailed:
		return "FAILED: " + s.Message
	case s.Phase != v1alpha1.StepPlanned:
		return "(not planned)"
	case s.Plan != nil && s.Plan.Summary != "":
		return s.Plan.Summary
	}
	return orDash(s.Message)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// tabLines lays rows out in columns as kubectl's tables are, every cell through oneLine, and
// returns the lines without trailing blanks, each after indent. Laid out apart, the step
// rows and each step's detail rows keep columns of their own.
func tabLines(rows [][]string, indent string) []string {
	var buf bytes.Buffer
	tw := printers.GetNewTabWriter(&buf)
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = oneLine(c, 0)
		}
		_, _ = fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush() // writes to a bytes.Buffer, which does not fail
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	for i := range lines {
		lines[i] = indent + strings.TrimRight(lines[i], " ")
	}
	return lines
}
