package framework

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/cert"

	"github.com/stepwise-dev/stepwise/internal/pgtest"
	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
)

// Archive is the PostgreSQL archive of a suite's operators and the registration of their
// history API with the aggregation layer: every operator StartOperator starts then
// archives there and serves history.stepwise.dev on Port.
type Archive struct {
	// Server is the PostgreSQL server, which a test may restart.
	Server  *pgtest.Server
	dsnFile string
	// Port is where the operators serve the history API (one operator at a time).
	Port              int
	certFile, keyFile string
}

// historyService is the Service the APIService names: an ExternalName of localhost, as
// the operators run on this machine, not in Pods.
const historyService = "stepwise-history"

// StartArchive starts a PostgreSQL server in the cluster's dir and registers the history
// API of the operators started from now on: a serving certificate for the name the API
// server verifies (the Service's), the Service and the APIService.
func (c *Cluster) StartArchive(ctx context.Context) (*Archive, error) {
	server, err := pgtest.Launch(ctx, pgtest.Options{Dir: filepath.Join(c.Dir, "archive")})
	if err != nil {
		return nil, fmt.Errorf("start the archive's PostgreSQL: %w", err)
	}
	a := &Archive{Server: server, dsnFile: filepath.Join(c.Dir, "archive-dsn")}
	if err := a.prepare(ctx, c); err != nil {
		return nil, errors.Join(err, server.Close())
	}
	c.archive = a
	return a, nil
}

func (a *Archive) prepare(ctx context.Context, c *Cluster) error {
	if err := os.WriteFile(a.dsnFile, []byte(a.Server.DSN), 0o600); err != nil {
		return fmt.Errorf("write the archive's DSN file: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("find a port for the history API: %w", err)
	}
	a.Port = lis.Addr().(*net.TCPAddr).Port
	if err := lis.Close(); err != nil {
		return fmt.Errorf("find a port for the history API: %w", err)
	}
	host := historyService + "." + OperatorNamespace + ".svc"
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return fmt.Errorf("make the history API's certificate: %w", err)
	}
	a.certFile, a.keyFile = filepath.Join(c.Dir, "history.crt"), filepath.Join(c.Dir, "history.key")
	if err := os.WriteFile(a.certFile, certPEM, 0o600); err != nil {
		return fmt.Errorf("write the history API's certificate: %w", err)
	}
	if err := os.WriteFile(a.keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("write the history API's key: %w", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: historyService, Namespace: OperatorNamespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if _, err := c.Client.CoreV1().Services(OperatorNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the history API's Service: %w", err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("create a dynamic client: %w", err)
	}
	gv := historyv1alpha1.SchemeGroupVersion
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": gv.Version + "." + gv.Group},
		"spec": map[string]any{
			"group": gv.Group, "version": gv.Version,
			"service":              map[string]any{"namespace": OperatorNamespace, "name": historyService, "port": int64(a.Port)},
			"caBundle":             base64.StdEncoding.EncodeToString(certPEM),
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(15),
		},
	}}
	apiServices := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := dyn.Resource(apiServices).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the history API's APIService: %w", err)
	}
	return nil
}

// args are the flags that make an operator archive and serve its history API.
func (a *Archive) args() []string {
	return []string{
		"--archive-dsn-file=" + a.dsnFile,
		"--history-secure-port=" + strconv.Itoa(a.Port),
		"--history-bind-address=127.0.0.1",
		"--history-tls-cert-file=" + a.certFile,
		"--history-tls-key-file=" + a.keyFile,
	}
}

// Archive is the suite's archive; nil without Suite.Archive.
func (c *Cluster) Archive() *Archive { return c.archive }

// Close stops the PostgreSQL server.
func (a *Archive) Close() error { return a.Server.Close() }
