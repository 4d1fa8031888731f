package cli

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// completionTimeout bounds the API call behind one completion: a shell waits for it.
const completionTimeout = 5 * time.Second

const completionLong = `Print a script that makes bash, zsh, fish or powershell complete kubectl-stepwise: its
commands and flags, and the names of pipelines, triggers and templates, read from the
cluster in the namespace of -n (or of the kubeconfig's context).

As a kubectl plugin (kubectl stepwise ..., kubectl 1.26 or later), no script of this
command is loaded: kubectl, with its own completion loaded (kubectl completion --help),
asks an executable named kubectl_complete-stepwise on the PATH. Create it next to
kubectl-stepwise (with krew: in ~/.krew/bin), as a script that runs
kubectl-stepwise __complete "$@":

  cat >/usr/local/bin/kubectl_complete-stepwise <<'EOF'
  #!/usr/bin/env sh
  exec kubectl-stepwise __complete "$@"
  EOF
  chmod +x /usr/local/bin/kubectl_complete-stepwise

To complete kubectl-stepwise run by its own name, load the script of your shell:

  source <(kubectl-stepwise completion bash)   # bash, with bash-completion installed
  source <(kubectl-stepwise completion zsh)
  kubectl-stepwise completion fish | source

Each shell's help (kubectl stepwise completion bash --help) says how to load it in every
new session.`

// addCompletionCommand adds cobra's completion command (bash, zsh, fish, powershell) to
// root, with help on kubectl's plugin completion.
func addCompletionCommand(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Short = "Print a shell's completion script; --help says how kubectl completes the plugin"
			c.Long = completionLong
		}
	}
}

// names lists the names of one kind of object in a namespace.
type names func(ctx context.Context, c *Clients, ns string) ([]string, error)

func pipelineNames(ctx context.Context, c *Clients, ns string) ([]string, error) {
	return namesIn(c.Stepwise.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{}))
}

func triggerNames(ctx context.Context, c *Clients, ns string) ([]string, error) {
	return namesIn(c.Stepwise.StepwiseV1alpha1().PipelineTriggers(ns).List(ctx, metav1.ListOptions{}))
}

func templateNames(ctx context.Context, c *Clients, ns string) ([]string, error) {
	return namesIn(c.Stepwise.StepwiseV1alpha1().PipelineTemplates(ns).List(ctx, metav1.ListOptions{}))
}

// namesIn returns the names of the items of a list a client returned.
func namesIn(list runtime.Object, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		if m, err := meta.Accessor(item); err == nil {
			out = append(out, m.GetName())
		}
	}
	return out, nil
}

// completeNames completes the first argument of a command, or the value of a flag
// (RegisterFlagCompletionFunc), with the names list returns in the command's namespace that
// start with what was typed; after the first argument, nothing (the flags it completes,
// --trigger, go with no argument). An error (no kubeconfig, the API server refusing or not
// answering) completes no name, as kubectl's completion does, and leaves the subcommands
// (triggers pause) to complete; it goes to $BASH_COMP_DEBUG_FILE only, as kubectl shows
// the stderr of kubectl_complete-stepwise on the terminal.
func completeNames(o *options, list names) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, c, err := o.scope()
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		all, err := list(ctx, c, ns)
		if err != nil {
			cobra.CompDebugln(fmt.Sprintf("complete in namespace %s: %v", ns, err), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, name := range all {
			// A shell reads one candidate a line, and a tab starts its description: a
			// name with either, or any space or control character, is no name the API
			// server would have accepted.
			if strings.HasPrefix(name, toComplete) && name != "" && !strings.ContainsFunc(name, unsafeInCompletion) {
				out = append(out, name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func unsafeInCompletion(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }

// completeFlag completes the value of cmd's flag with complete.
func completeFlag(cmd *cobra.Command, flag string, complete cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, complete); err != nil {
		panic(err) // no such flag, or completed twice: a mistake in the code
	}
}
