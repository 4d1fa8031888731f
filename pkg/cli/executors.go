package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

func newExecutorsCommand(o *options) *cobra.Command {
	var output, operatorNamespace, name string
	cmd := &cobra.Command{
		Use:   "executors [EXECUTOR...]",
		Short: "List the executors the running operator offers",
		Long: `List the executors the running operator offers, built in and served by plugins, with
their parameters (* marks a required one, = its default). Name executors to see each in
full: every parameter with its type, whether it is required, its default, the values an
enum takes, and what it is for. A parameter without a type (-) takes any text.

The operator publishes this catalogue at start in the ConfigMap ` + catalog.DefaultName + ` of its
namespace (--operator-namespace, or $` + operatorNamespaceEnv + `, default ` + catalog.DefaultNamespace + `).`,
		Example: `  kubectl stepwise executors
  kubectl stepwise executors node.drain k8s.wait`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := termsafe.CheckFormat(output); err != nil {
				return err
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			cat, err := catalog.Read(cmd.Context(), c.Kube, operatorNamespace, name)
			if err != nil {
				return fmt.Errorf("%w (is the operator running in namespace %s? see --operator-namespace)", err, operatorNamespace)
			}
			if len(args) > 0 {
				var picked []catalog.Entry
				for _, want := range args {
					i := slices.IndexFunc(cat.Executors, func(e catalog.Entry) bool { return e.Name == want })
					if i < 0 {
						return fmt.Errorf("the operator offers no executor %q", want)
					}
					picked = append(picked, cat.Executors[i])
				}
				cat.Executors = picked
			}
			switch {
			case output != "":
				data, err := termsafe.Encode(cat, output)
				if err != nil {
					return fmt.Errorf("encode catalogue: %w", err)
				}
				_, err = o.streams.Out.Write(data)
				return err
			case len(args) > 0:
				return PrintExecutorDetails(o.streams.Out, cat.Executors)
			}
			if err := PrintExecutors(o.streams.Out, cat.Executors); err != nil {
				return err
			}
			return PrintRefusedPlugins(o.streams.Out, cat.RefusedPlugins)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml. Default: a table.")
	addOperatorNamespaceFlag(cmd, &operatorNamespace)
	cmd.Flags().StringVar(&name, "catalog-name", catalog.DefaultName, "Name of the ConfigMap the operator publishes its executors in.")
	return cmd
}

// PrintExecutors writes a table of executors, one a line. Plugins write what the
// catalogue says of them: every value goes through termsafe.OneLine.
func PrintExecutors(w io.Writer, entries []catalog.Entry) error {
	tw := printers.GetNewTabWriter(w)
	_, _ = fmt.Fprintln(tw, "EXECUTOR\tVERSION\tSERVED BY\tPARAMETERS\tDESCRIPTION")
	for _, e := range entries {
		params := make([]string, 0, len(e.Parameters))
		for _, p := range e.Parameters {
			switch {
			case p.Required:
				params = append(params, p.Name+"*")
			case p.Default != "":
				params = append(params, p.Name+"="+p.Default)
			default:
				params = append(params, p.Name)
			}
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termsafe.OneLine(e.Name, 0), termsafe.OneLine(orDash(e.Version), 0), termsafe.OneLine(servedBy(e), 0),
			termsafe.OneLine(orDash(strings.Join(params, ",")), maxMessage), termsafe.OneLine(e.Description.Description, maxMessage))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write executors: %w", err)
	}
	return nil
}

// PrintRefusedPlugins writes, after the executors, the plugins the operator refused and
// why (nothing when none was): the steps of their executors wait on them.
func PrintRefusedPlugins(w io.Writer, refused []executor.Refusal) error {
	if len(refused) == 0 {
		return nil
	}
	tw := printers.GetNewTabWriter(w)
	_, _ = fmt.Fprintln(tw, "\nREFUSED PLUGIN\tREASON\tMESSAGE")
	for _, r := range refused {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", termsafe.OneLine(r.Plugin, 0), termsafe.OneLine(string(r.Reason), 0), termsafe.OneLine(r.Message, maxMessage))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write refused plugins: %w", err)
	}
	return nil
}

// PrintExecutorDetails writes each executor with every parameter and its description,
// each value through termsafe.OneLine.
func PrintExecutorDetails(w io.Writer, entries []catalog.Entry) error {
	tw := printers.GetNewTabWriter(w)
	for i, e := range entries {
		if i > 0 {
			_, _ = fmt.Fprintln(tw)
		}
		_, _ = fmt.Fprintf(tw, "Executor:\t%s\n", termsafe.OneLine(e.Name, 0))
		_, _ = fmt.Fprintf(tw, "Version:\t%s\n", termsafe.OneLine(orDash(e.Version), 0))
		_, _ = fmt.Fprintf(tw, "Served by:\t%s\n", termsafe.OneLine(servedBy(e), 0))
		_, _ = fmt.Fprintf(tw, "Description:\t%s\n", termsafe.OneLine(e.Description.Description, 0))
		if len(e.Parameters) == 0 {
			_, _ = fmt.Fprintf(tw, "Parameters:\tnone\n")
			continue
		}
		_, _ = fmt.Fprintf(tw, "Parameters:\n")
		_, _ = fmt.Fprintf(tw, "  NAME\tTYPE\tREQUIRED\tDEFAULT\tVALUES\tDESCRIPTION\n")
		for _, p := range e.Parameters {
			required := "no"
			if p.Required {
				required = "yes"
			}
			_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", termsafe.OneLine(p.Name, 0), termsafe.OneLine(orDash(string(p.Type)), 0), required,
				termsafe.OneLine(orDash(p.Default), 0), termsafe.OneLine(orDash(strings.Join(p.Values, ",")), 0), termsafe.OneLine(p.Description, 0))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write executors: %w", err)
	}
	return nil
}

func servedBy(e catalog.Entry) string {
	if e.Plugin == "" {
		return "built-in"
	}
	return e.Plugin
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
