package node

import "github.com/stepwise-dev/stepwise/pkg/executor"

// nodeParam is the parameter every node executor takes.
var nodeParam = executor.Parameter{Name: "node", Description: "Name of the Node.", Required: true}

// Describe documents node.cordon for the executor catalogue.
func (Cordon) Describe() executor.Description {
	return executor.Description{
		Description: "Marks the node unschedulable; outputs wasSchedulable and providerID. " +
			"Teardown uncordons it only if this pipeline cordoned it.",
		Parameters: []executor.Parameter{nodeParam},
	}
}

// Describe documents node.drain for the executor catalogue.
func (Drain) Describe() executor.Description {
	return executor.Description{
		Description: "Evicts the node's pods with the Eviction API, honouring PodDisruptionBudgets " +
			"(DaemonSet pods stay); outputs podsEvicted.",
		Parameters: []executor.Parameter{
			nodeParam,
			{Name: "timeout", Description: "How long the drain may take, a Go duration (default 10m)."},
			{Name: "policy", Description: "What happens when the timeout passes with pods left: Fail (default) fails the step, Force deletes them."},
			{Name: "podSelector", Description: "Label selector: drain only the pods it matches."},
			{Name: "gracePeriodSeconds", Description: "Grace period given to each pod; default: the pod's own."},
			{Name: "deleteEmptyDirData", Description: "true: evict pods with emptyDir volumes too, losing their data."},
		},
	}
}

// Describe documents node.delete for the executor catalogue.
func (Delete) Describe() executor.Description {
	return executor.Description{
		Description: "Deletes the Node object; a node already gone is fine. Teardown does nothing.",
		Parameters:  []executor.Parameter{nodeParam},
	}
}
