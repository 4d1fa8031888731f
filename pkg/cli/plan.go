package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/flagpairs"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

const (
	defaultPlanTimeout = 2 * time.Minute
	defaultPlanMax     = 5
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
` + pipelineops.PlanLabel + `=true). The operator asks each step's executor, in order, what it would do,
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
	completeFlag(cmd, "template", completeNames(o, templateNames))
	completeFlag(cmd, "trigger", completeNames(o, triggerNames))
	cmd.MarkFlagsOneRequired("filename", "template", "trigger")
	cmd.MarkFlagsMutuallyExclusive("filename", "template", "trigger")
	return cmd
}

// check refuses flags that do not go together; cobra already saw to the one source.
func (po *planOptions) check(cmd *cobra.Command) error {
	if err := termsafe.CheckFormat(po.output); err != nil {
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
	return po.planOne(ctx, c, ns, "Plan of pipeline "+ns+"/"+orDash(name), pipelineops.DryRunOf(p, name))
}

// planTemplate plans a pipeline of a template, as run would create it.
func (po *planOptions) planTemplate(ctx context.Context) error {
	params, err := flagpairs.Parse("parameter", po.pairs)
	if err != nil {
		return err
	}
	ns, c, err := po.scope()
	if err != nil {
		return err
	}
	p, err := pipelineops.TemplateDryRun(ctx, c.Stepwise, ns, po.template, params, po.serviceAccount)
	if err != nil {
		return err
	}
	return po.planOne(ctx, c, ns, "Plan of template "+ns+"/"+po.template, p)
}

// planOne plans one dry-run pipeline and prints its plan.
func (po *planOptions) planOne(ctx context.Context, c *Clients, ns, title string, p *v1alpha1.Pipeline) error {
	pl := pipelineops.NewPlanner(c.Stepwise, ns)
	defer po.cleanup(ctx, pl, ns)
	results, err := pl.Plan(ctx, []*v1alpha1.Pipeline{p}, po.timeout)
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
	data, err := termsafe.Encode(obj, po.output)
	if err != nil {
		return fmt.Errorf("encode the plan: %w", err)
	}
	if _, err := po.streams.Out.Write(data); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	return nil
}

// cleanup deletes the dry-run pipelines of namespace ns, or with --keep names them: on
// stdout after a table, on stderr when stdout holds a JSON or YAML document. What it could
// not delete it reports on stderr: the plan was made, the command does not fail for it.
func (po *planOptions) cleanup(ctx context.Context, pl *pipelineops.Planner, ns string) {
	if po.keep {
		w := po.streams.Out
		if po.output != "" {
			w = po.streams.ErrOut
		}
		for _, p := range pl.Created() {
			_, _ = fmt.Fprintf(w, "pipeline.stepwise.dev/%s kept in %s (a dry run: deleting it tears nothing down)\n", termsafe.OneLine(p.Name, 0), ns)
		}
		return
	}
	for _, err := range unjoin(pl.Delete(ctx)) {
		_, _ = fmt.Fprintf(po.streams.ErrOut, "warning: %s\n", termsafe.OneLine(err.Error(), 0))
	}
}

// unjoin is the errors errors.Join joined into err, each to be reported on a line of its
// own; none for nil.
func unjoin(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return joined.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
