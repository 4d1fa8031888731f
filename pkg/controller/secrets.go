package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// readSecrets reads the Secrets named by the parameters ending in "Secret", in the
// pipeline's namespace, with the clients that act as the pipeline's ServiceAccount (the
// operator itself may read none). Their data is merged by key, in parameter-name order,
// and never logged. A step without such parameters reads nothing.
func readSecrets(ctx context.Context, clients *executor.Clients, namespace string, params map[string]string) (map[string][]byte, error) {
	var names []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if strings.HasSuffix(k, contract.SecretSuffix) && params[k] != "" {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if clients == nil || clients.Kube == nil {
		return nil, contract.Permanent("SecretUnavailable", errors.New("no Kubernetes client to read the step's Secrets"))
	}
	out := map[string][]byte{}
	for _, param := range names {
		s, err := clients.Kube.CoreV1().Secrets(namespace).Get(ctx, params[param], metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, contract.Retryable("SecretNotFound", fmt.Errorf("parameter %s: Secret %s/%s not found", param, namespace, params[param]))
			}
			return nil, fmt.Errorf("parameter %s: read Secret %s/%s: %w", param, namespace, params[param], err)
		}
		for k, v := range s.Data {
			out[k] = v
		}
		for k, v := range s.StringData {
			out[k] = []byte(v)
		}
	}
	return out, nil
}
