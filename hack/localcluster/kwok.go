package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"sigs.k8s.io/kwok/pkg/config"
	kwok "sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

// runKwok runs kwok's controller, as the kwok binary would. Built into this binary it
// shares the Kubernetes libraries with the control plane instead of compiling its own
// versions of them. kwok's flag helpers read os.Args themselves, so it must be started as
// a link named kwok (bin/kwok), with its arguments in os.Args[1:].
func runKwok() int {
	// cobra merges pflag.CommandLine into every command, and the control plane's packages
	// register flags there at init (component-base's --version, not a bool as kwok's is);
	// this process runs only kwok, so it starts from kwok's own flags alone.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	flags := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flags.ParseErrorsAllowlist.UnknownFlags = true
	flags.Usage = func() {}

	ctx, logger := log.InitFlags(signals.SetupSignalContext(), flags)
	ctx, err := config.InitFlags(ctx, flags)
	if err != nil {
		fmt.Fprintln(os.Stderr, flags.FlagUsages())
		logger.Error("Init config flags", "err", err)
		return 1
	}
	cmd := kwok.NewCommand(ctx)
	cmd.PersistentFlags().AddFlagSet(flags)
	cmd.SetArgs(os.Args[1:])
	if err := cmd.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}
