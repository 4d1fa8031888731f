package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// readSecrets reads the Secrets named by the parameters ending in "Secret" (or declared
// of type secret), in the pipeline's namespace, with the clients that act as the
// pipeline's ServiceAccount (the operator itself may read none). It returns their data
// merged by key, in parameter-name order, and by parameter; it is never logged. A step
// without such parameters reads nothing.
func readSecrets(ctx context.Context, clients *executor.Clients, namespace string, params map[string]string,
	types map[string]contract.ParamType) (map[string][]byte, map[string]map[string][]byte, error) {
	var names []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if contract.NamesSecret(k, types[k]) && params[k] != "" {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil, nil, nil
	}
	if clients == nil || clients.Kube == nil {
		return nil, nil, contract.Permanent("SecretUnavailable", errors.New("no Kubernetes client to read the step's Secrets"))
	}
	out := map[string][]byte{}
	byParam := make(map[string]map[string][]byte, len(names))
	for _, param := range names {
		s, err := getSecret(ctx, clients, namespace, params[param])
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, contract.Retryable("SecretNotFound", fmt.Errorf("parameter %s: Secret %s/%s not found", param, namespace, params[param]))
			}
			return nil, nil, fmt.Errorf("parameter %s: read Secret %s/%s: %w", param, namespace, params[param], err)
		}
		data := make(map[string][]byte, len(s.Data)+len(s.StringData))
		for k, v := range s.Data {
			data[k] = v
		}
		for k, v := range s.StringData {
			data[k] = []byte(v)
		}
		maps.Copy(out, data)
		byParam[param] = data
	}
	return out, byParam, nil
}

// getSecret reads a Secret through the clients' Secret reader, which logs none of it, or
// their typed client when they have none (fakes in tests).
func getSecret(ctx context.Context, clients *executor.Clients, namespace, name string) (*corev1.Secret, error) {
	if clients.Secrets != nil {
		return clients.Secrets.GetSecret(ctx, namespace, name)
	}
	return clients.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}
