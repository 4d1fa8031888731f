package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/dashboard"
)

func newDashboardCommand(o *options) *cobra.Command {
	var (
		port              int
		allNamespaces     bool
		openBrowser       bool
		operatorNamespace string
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a read-only web dashboard of pipelines, templates and triggers on loopback",
		Long: `Serve a web dashboard on 127.0.0.1, in the manner of kubectl proxy: it reads the cluster with
your kubeconfig's credentials, so it shows nothing you may not read, and needs nothing
installed in the cluster. Pages: the pipelines (filters, counts by phase, paginated), one
pipeline (its steps on a timeline, live, with their messages, outputs, plans and Events),
templates, triggers with their queues, and the executors on offer. Retry, suspend, resume
and delete ask for confirmation and are made with your credentials: RBAC decides.

It prints a URL with a random token: other users of the machine cannot use the dashboard
without it. Stop it with Ctrl-C.`,
		Example: `  kubectl stepwise dashboard -n node-ops
  kubectl stepwise dashboard -A --port 9000 --open`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			if allNamespaces {
				ns = ""
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			token, err := dashboard.NewToken()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			s, err := dashboard.New(ctx, dashboard.Config{
				Stepwise: c.Stepwise, Kube: c.Kube, Namespace: ns, Token: token, OperatorNamespace: operatorNamespace,
			})
			if err != nil {
				return err
			}
			l, err := dashboard.ListenLoopback(port)
			if err != nil {
				return err
			}
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			select {
			case <-s.Synced():
			case err := <-ran:
				_ = l.Close()
				return fmt.Errorf("read the cluster: %w", err)
			case <-ctx.Done():
				_ = l.Close()
				return ctx.Err()
			}
			url := "http://" + l.Addr().String() + "/?token=" + token
			scope := "namespace " + ns
			if ns == "" {
				scope = "all namespaces"
			}
			_, _ = fmt.Fprintf(o.streams.Out, "Stepwise dashboard of %s at %s\n(Ctrl-C stops it)\n", termsafe.OneLine(scope, 0), url)
			if openBrowser {
				// A missing opener is only a warning.
				remove, err := openDashboard(ctx, url, xdgOpen)
				if err != nil {
					_, _ = fmt.Fprintf(o.streams.ErrOut, "could not open a browser (%v): open the URL above\n", err)
				}
				defer remove()
			}
			serveErr := s.Serve(ctx, l)
			cancel()
			if err := <-ran; err != nil && serveErr == nil {
				return err
			}
			return serveErr
		},
	}
	cmd.Flags().IntVar(&port, "port", 8089, "The loopback port to listen on; 0 picks a free one.")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Show every namespace you may read, not only the current one.")
	cmd.Flags().BoolVar(&openBrowser, "open", false, "Open the dashboard in the default browser (xdg-open).")
	addOperatorNamespaceFlag(cmd, &operatorNamespace)
	return cmd
}
