package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// recordRun records in r's status what its Create hook is called with (the run record),
// unless the step already has a record for this spec of it and this generation.
func (ps *pipelineSync) recordRun(r stepRef, exec executor.TaskExecutor, req *executor.Request) error {
	hash := stepHash(r.step)
	if ran := r.s.Ran; ran != nil && ran.StepHash == hash && ran.Generation == ps.p.Generation && ran.Executor == exec.Name() {
		return nil
	}
	params, err := recordedParams(req.Params, paramTypes(executor.Describe(exec).Parameters))
	if err != nil {
		return err
	}
	r.s.Ran = &v1alpha1.StepRun{Executor: exec.Name(), Params: params, StepHash: hash, Generation: ps.p.Generation}
	return nil
}

// recordedParams are the parameters a run record keeps: all of them, a YAML parameter as
// its digest, within v1alpha1.MaxRecordedParamsSize (the status must stay small).
func recordedParams(params map[string]string, types map[string]contract.ParamType) (map[string]string, error) {
	if len(params) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(params))
	size := 0
	for k, v := range params {
		if types[k] == contract.ParamYAML {
			sum := sha256.Sum256([]byte(v))
			v = "sha256:" + hex.EncodeToString(sum[:])
		}
		out[k] = v
		size += len(k) + len(v)
	}
	if size > v1alpha1.MaxRecordedParamsSize {
		return nil, contract.Permanent(contract.ReasonInvalidParameter, fmt.Errorf(
			"the step's parameters are %d bytes once resolved; at most %d are kept in its run record for its teardown",
			size, v1alpha1.MaxRecordedParamsSize))
	}
	return out, nil
}
