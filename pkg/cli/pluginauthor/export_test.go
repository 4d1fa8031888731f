package pluginauthor

// What the tests of package pluginauthor_test, which run the commands through
// kubectl-stepwise (pkg/cli imports this package), read of its insides.
type RunReport = pluginRunReport

const (
	HookDone    = hookDone
	HookWaiting = hookWaiting
	HookFailed  = hookFailed
	RunUID      = runUID
)
