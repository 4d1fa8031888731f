// Package cli is kubectl-stepwise, a kubectl plugin (kubectl stepwise ...) to look at and
// steer Pipelines: status, watch, retry, suspend, resume, approve, reject, plan (a dry
// run), and the executors the running operator offers; and, with no cluster, to write
// executor plugins and run their hooks (plugin init, plugin run: package pluginauthor).
// cmd/kubectl-stepwise only calls Execute.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/internal/version"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/pluginauthor"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// Exit codes of kubectl-stepwise.
const (
	ExitOK = 0
	// ExitError: the command could not do what it was asked (bad flags, API errors,
	// a watch that timed out).
	ExitError = 1
	// ExitPipelineFailed: the command worked, and the pipeline it looked at has failed
	// (a step failed, or its teardown is blocked), or a plan failed.
	ExitPipelineFailed = 2
	// ExitHookFailed: plugin run worked, and the hook failed (or the engine would refuse
	// its parameters). The same code as ExitPipelineFailed: what was run failed.
	ExitHookFailed = 2
	// ExitHookWaiting: plugin run worked, and the hook is not done: it asks to be called
	// again later.
	ExitHookWaiting = 3
)

// errPipelineFailed makes Execute exit with ExitPipelineFailed after the command printed
// what it had to say; pluginauthor.ErrHookFailed and ErrHookWaiting with ExitHookFailed and
// ExitHookWaiting.
var errPipelineFailed = errors.New("the pipeline failed")

// Clients are the API clients a command uses.
type Clients struct {
	Stepwise clientset.Interface
	Kube     kubernetes.Interface
	// Dynamic and Mapper read objects of any kind, as plan --trigger reads the objects a
	// trigger watches.
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// Now is the clock of the commands that compute times (history's ages and --since);
	// nil: time.Now.
	Now func() time.Time
}

// now is the time on c's clock.
func (c *Clients) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// options are shared by every command.
type options struct {
	streams     genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	// clients builds the clients; tests replace it with fakes.
	clients func() (*Clients, error)
}

// namespace is the namespace of the kubeconfig's context, or of --namespace.
func (o *options) namespace() (string, error) {
	ns, _, err := o.configFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("find the namespace: %w", err)
	}
	return ns, nil
}

// scope is what a command that acts in one namespace needs: the namespace and the clients.
func (o *options) scope() (string, *Clients, error) {
	ns, err := o.namespace()
	if err != nil {
		return "", nil, err
	}
	c, err := o.clients()
	if err != nil {
		return "", nil, err
	}
	return ns, c, nil
}

// scopeFor is scope for a command that prints in the format output (-o): a format termsafe
// does not know is refused first.
func (o *options) scopeFor(output string) (string, *Clients, error) {
	if err := termsafe.CheckFormat(output); err != nil {
		return "", nil, err
	}
	return o.scope()
}

// named makes cmd a command on one object, NAME, of the namespace o names: NAME completes
// from list, and cmd runs run with its context, the namespace, the clients and NAME.
func (o *options) named(cmd *cobra.Command, list names, run func(ctx context.Context, ns string, c *Clients, name string) error) *cobra.Command {
	cmd.Args = cobra.ExactArgs(1)
	cmd.ValidArgsFunction = completeNames(o, list)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ns, c, err := o.scope()
		if err != nil {
			return err
		}
		return run(cmd.Context(), ns, c, args[0])
	}
	return cmd
}

func (o *options) restClients() (*Clients, error) {
	cfg, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	sw, err := clientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create stepwise client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	// Deferred: discovery runs only when a command maps a kind.
	mapper, err := o.configFlags.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("create REST mapper: %w", err)
	}
	return &Clients{Stepwise: sw, Kube: kube, Dynamic: dyn, Mapper: mapper}, nil
}

// NewCommand returns the root command. clients, when not nil, replaces the clients built
// from the kubeconfig flags (for tests).
func NewCommand(streams genericiooptions.IOStreams, clients func() (*Clients, error)) *cobra.Command {
	o := &options{streams: streams, configFlags: genericclioptions.NewConfigFlags(true)}
	o.clients = clients
	if o.clients == nil {
		o.clients = o.restClients
	}
	cmd := &cobra.Command{
		Use:   "kubectl-stepwise",
		Short: "Look at and steer Stepwise Pipelines",
		Long: `kubectl stepwise shows the steps of Stepwise Pipelines and steers them. Its plugin
commands write executor plugins and run their hooks, with no cluster.

Plan before you run: kubectl stepwise plan shows what a pipeline, a template or a trigger
would do, step by step, without doing it.

Exit codes: 0 success, 1 error, 2 the pipeline failed (status, watch), the plan failed
(plan) or the hook failed (plugin run), 3 the hook is waiting (plugin run).`,
		Annotations: map[string]string{
			// Usage and help say "kubectl stepwise", as kubectl plugins do.
			cobra.CommandDisplayNameAnnotation: "kubectl stepwise",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	o.configFlags.AddFlags(cmd.PersistentFlags())
	// --version, on the root only and without cobra's -v, which kubectl users know as the
	// log verbosity.
	cmd.Version = version.Version
	cmd.Flags().Bool("version", false, "Print the version of kubectl stepwise and exit.")
	cmd.AddCommand(
		newStatusCommand(o),
		newWhyCommand(o),
		newWatchCommand(o),
		newRetryCommand(o),
		newRerunCommand(o),
		newSuspendCommand(o, true),
		newSuspendCommand(o, false),
		newDecideCommand(o, v1alpha1.ApprovalApprove),
		newDecideCommand(o, v1alpha1.ApprovalReject),
		newExecutorsCommand(o),
		newTemplatesCommand(o),
		newRunCommand(o),
		newPlanCommand(o),
		newDashboardCommand(o),
		newTriggersCommand(o),
		newHistoryCommand(o),
		pluginauthor.NewCommand(streams),
	)
	addCompletionCommand(cmd)
	return cmd
}

// Execute runs kubectl-stepwise with args and returns its exit code.
func Execute(ctx context.Context, args []string, streams genericiooptions.IOStreams, clients func() (*Clients, error)) int {
	cmd := NewCommand(streams, clients)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errPipelineFailed):
		return ExitPipelineFailed
	case errors.Is(err, pluginauthor.ErrHookFailed):
		return ExitHookFailed
	case errors.Is(err, pluginauthor.ErrHookWaiting):
		return ExitHookWaiting
	default:
		// Errors quote the API server and the cluster's objects.
		_, _ = fmt.Fprintln(streams.ErrOut, "error:", termsafe.OneLine(err.Error(), 0))
		return ExitError
	}
}

// Main is what cmd/kubectl-stepwise runs.
func Main(ctx context.Context) int {
	return Execute(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, nil)
}
