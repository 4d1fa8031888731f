package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

// TestTaskWaitsOutliveTheRequestBound: vCenter holds a wait for a task's change until it
// changes, and a power-off or a destroy may take longer than one request may
// (requestTimeout); the executor's waits are bounded by vCenter under that bound, so that
// a long task is waited for to its end, its failure given as govmomi gives it.
func TestTaskWaitsOutliveTheRequestBound(t *testing.T) {
	const bound = 1500 * time.Millisecond
	tests := []struct {
		name  string
		state types.TaskInfoState
		fault *types.LocalizedMethodFault
		// wantFault is the fault of the task's error; nil when it succeeds.
		wantFault types.BaseMethodFault
	}{
		{name: "succeeds", state: types.TaskInfoStateSuccess},
		{
			name: "fails", state: types.TaskInfoStateError,
			fault:     &types.LocalizedMethodFault{Fault: &types.InvalidPowerState{}, LocalizedMessage: "the VM is off"},
			wantFault: &types.InvalidPowerState{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := startVCSim(t)
			ctx := t.Context()
			admin := sim.Client().Client
			// A task of an extension of the test's, whose state the test sets.
			const taskType = "dev.stepwise.test.long"
			require.NoError(t, object.NewExtensionManager(admin).Register(ctx, types.Extension{
				Key: "dev.stepwise.test", Version: "1", LastHeartbeatTime: time.Now(),
				Description: &types.Description{Label: "test", Summary: "test"},
				TaskList:    []types.ExtensionTaskTypeInfo{{TaskID: taskType}},
			}))
			created, err := methods.CreateTask(ctx, admin, &types.CreateTask{
				This: *admin.ServiceContent.TaskManager, Obj: admin.ServiceContent.RootFolder, TaskTypeId: taskType,
			})
			require.NoError(t, err)
			ref := created.Returnval.Task

			e := newTestExecutor()
			e.requestTimeout = bound
			creds, err := parseCredentials(sim.secrets(), "vsphere-creds")
			require.NoError(t, err)
			vc, err := e.login(ctx, creds, "vsphere-creds")
			require.NoError(t, err)
			defer vc.logout(ctx)

			ended := make(chan error, 1)
			go func() {
				time.Sleep(2 * bound)
				ended <- object.NewTask(admin, ref).SetState(ctx, tt.state, nil, tt.fault)
			}()
			start := time.Now()
			err = vc.waitTask(ctx, object.NewTask(vc.client, ref))
			took := time.Since(start)
			require.NoError(t, <-ended)
			assert.GreaterOrEqual(t, took, 2*bound, "waited past the bound of a request")
			if tt.wantFault == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, fault.Is(err, tt.wantFault), "%T %v", err, err)
			assert.Contains(t, err.Error(), "the VM is off")
		})
	}
}
