package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stepwise-dev/stepwise/pkg/controller"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

// clients are the operator's own clients and the config the impersonating ones derive from.
type clients struct {
	config   *rest.Config
	kube     kubernetes.Interface
	stepwise clientset.Interface
}

// newClients builds the clients with the QPS, burst and compression of the flags; every client made
// from the config, the impersonating ones too, counts its API requests in reg.
func newClients(opts *options, reg prometheus.Registerer) (*clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags(opts.master, opts.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS = float32(opts.qps)
	cfg.Burst = opts.burst
	cfg.DisableCompression = !opts.apiCompression
	cfg.UserAgent = controller.ControllerName
	cfg.Wrap(metrics.NewAPIRequests(reg).WrapTransport)

	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create kubernetes client: %w", err)
	}
	sw, err := clientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create stepwise client: %w", err)
	}
	return &clients{config: cfg, kube: kube, stepwise: sw}, nil
}

// whoAmI is the user the API server authenticates the operator as (a SelfSubjectReview,
// which every authenticated user may ask).
func whoAmI(ctx context.Context, kube kubernetes.Interface) (string, error) {
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the API server who the operator is: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}
