package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/catalog"
)

// namespaceEnv names the operator's namespace for `executors` when --operator-namespace is
// not given.
const namespaceEnv = "STEPWISE_NAMESPACE"

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
namespace (--operator-namespace, or $` + namespaceEnv + `, default ` + catalog.DefaultNamespace + `).`,
		Example: `  kubectl stepwise executors
  kubectl stepwise executors node.drain k8s.wait`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
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
				data, err := encodeOutput(cat, output)
				if err != nil {
					return fmt.Errorf("encode catalogue: %w", err)
				}
				_, err = o.streams.Out.Write(data)
				return err
			case len(args) > 0:
				return PrintExecutorDetails(o.streams.Out, cat.Executors)
			}
			return PrintExecutors(o.streams.Out, cat.Executors)
		},
	}
	defaultNS := os.Getenv(namespaceEnv)
	if defaultNS == "" {
		defaultNS = catalog.DefaultNamespace
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml. Default: a table.")
	cmd.Flags().StringVar(&operatorNamespace, "operator-namespace", defaultNS, "Namespace the operator runs in (its --namespace).")
	cmd.Flags().StringVar(&name, "catalog-name", catalog.DefaultName, "Name of the ConfigMap the operator publishes its executors in.")
	return cmd
}

// PrintExecutors writes a table of executors, one a line. Plugins write what the
// catalogue says of them: every value goes through oneLine.
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
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(e.Name, 0), oneLine(orDash(e.Version), 0), oneLine(servedBy(e), 0),
			oneLine(orDash(strings.Join(params, ",")), maxMessage), oneLine(e.Description.Description, maxMessage))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write executors: %w", err)
	}
	return nil
}

// PrintExecutorDetails writes each executor with every parameter and its description,
// each value through oneLine.
func PrintExecutorDetails(w io.Writer, entries []catalog.Entry) error {
	tw := printers.GetNewTabWriter(w)
	for i, e := range entries {
		if i > 0 {
			_, _ = fmt.Fprintln(tw)
		}
		_, _ = fmt.Fprintf(tw, "Executor:\t%s\n", oneLine(e.Name, 0))
		_, _ = fmt.Fprintf(tw, "Version:\t%s\n", oneLine(orDash(e.Version), 0))
		_, _ = fmt.Fprintf(tw, "Served by:\t%s\n", oneLine(servedBy(e), 0))
		_, _ = fmt.Fprintf(tw, "Description:\t%s\n", oneLine(e.Description.Description, 0))
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
			_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", oneLine(p.Name, 0), oneLine(orDash(string(p.Type)), 0), required,
				oneLine(orDash(p.Default), 0), oneLine(orDash(strings.Join(p.Values, ",")), 0), oneLine(p.Description, 0))
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
