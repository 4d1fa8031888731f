package historyapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	openapiutil "k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/apis/history"
	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
)

// Options configure the server.
type Options struct {
	// BindAddress and BindPort are where the server listens (HTTPS only). BindPort 0
	// takes a free port (tests); Server.Addr tells which.
	BindAddress net.IP
	BindPort    int
	// TLSCertFile and TLSKeyFile are the serving certificate and its key, PEM; the
	// APIService's caBundle must verify the certificate. Without them the server makes a
	// self-signed one for localhost and AlternateNames, kept in CertDir (reused across
	// restarts) or, with CertDir empty, in memory.
	TLSCertFile, TLSKeyFile string
	CertDir                 string
	// AlternateNames are DNS names or IP addresses the self-signed certificate is also
	// for, e.g. the Service's stepwise-history.stepwise-system.svc.
	AlternateNames []string
	// Kubeconfig is the API server to which authentication (TokenReview, the front proxy's
	// client CA in kube-system/extension-apiserver-authentication) and authorization
	// (SubjectAccessReview) are delegated; "" is the in-cluster config, which must then
	// exist.
	Kubeconfig string

	// Authn and Authz, when set, replace the delegated authenticator and authorizer. For
	// tests, which have no API server to delegate to; never set them in production.
	Authn authenticator.Request
	Authz authorizer.Authorizer
}

// DefaultOptions serves on every address, port 8443, with an in-memory self-signed
// certificate and the in-cluster config.
func DefaultOptions() Options {
	return Options{BindAddress: net.IPv4zero, BindPort: 8443}
}

// Validate returns what is wrong with o, nothing when it is usable.
func (o Options) Validate() []error {
	var errs []error
	if o.BindAddress == nil {
		errs = append(errs, errors.New("the bind address is missing"))
	}
	if o.BindPort < 0 || o.BindPort > 65535 {
		errs = append(errs, fmt.Errorf("the bind port must be 0 (any) to 65535, got %d", o.BindPort))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("the serving certificate and its key go together"))
	}
	if o.TLSCertFile != "" && o.CertDir != "" {
		errs = append(errs, errors.New("a certificate directory is for a self-signed certificate: not with a certificate file"))
	}
	return errs
}

// Server is the generic API server serving history.stepwise.dev.
type Server struct {
	generic *genericapiserver.GenericAPIServer
	addr    net.Addr
}

// New makes the server and binds its port; Run serves. It asks the API server for the
// front proxy's client CA now, so it fails when the API server is unreachable (unless
// Authn and Authz are set).
func New(o Options, a Archive) (srv *Server, err error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("history API options: %w", errors.Join(errs...))
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)

	serving := genericoptions.NewSecureServingOptions()
	serving.BindAddress = o.BindAddress
	serving.BindPort = o.BindPort
	serving.ServerCert.CertKey = genericoptions.CertKey{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile}
	serving.ServerCert.CertDirectory = o.CertDir // empty: in memory
	if o.BindPort == 0 {
		// The options treat port 0 as "do not serve"; a listener of our own serves on
		// whatever port the kernel gives.
		l, err := net.Listen("tcp", net.JoinHostPort(o.BindAddress.String(), "0"))
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", o.BindAddress, err)
		}
		serving.Listener = l
	}
	defer func() {
		if err != nil && serving.Listener != nil {
			_ = serving.Listener.Close()
		}
	}()
	var dnsNames []string
	var ips []net.IP
	for _, n := range o.AlternateNames {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, n)
		}
	}
	if err := serving.MaybeDefaultWithSelfSignedCerts("localhost", dnsNames, ips); err != nil {
		return nil, fmt.Errorf("make the history API's self-signed certificate: %w", err)
	}

	config := genericapiserver.NewConfig(codecs)
	if err := serving.WithLoopback().ApplyToConfig(config); err != nil {
		return nil, fmt.Errorf("configure the history API's serving: %w", err)
	}
	if err := applyAuth(o, config); err != nil {
		return nil, err
	}
	config.EffectiveVersion = utilcompatibility.DefaultBuildEffectiveVersion()
	// The operator serves its own profiles behind its own authorization.
	config.EnableProfiling = false
	// Installing an API group needs OpenAPI v3 models (for server-side apply, which a
	// read-only API never does). The models are a stub, an object of any fields, and the
	// server does not publish them: the aggregator skips an API server without /openapi,
	// and kubectl get needs none since the server prints the table. kubectl explain
	// pipelinerecords therefore knows nothing; generated definitions would fix that.
	config.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openAPIDefinitions, openapinamer.NewDefinitionNamer(scheme))
	config.SkipOpenAPIInstallation = true

	generic, err := config.Complete(nil).New("stepwise-history", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("make the history API server: %w", err)
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(history.GroupName, scheme, metav1.ParameterCodec, codecs)
	group.VersionedResourcesStorageMap[historyv1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		resource: newStorage(a, clock.RealClock{}),
	}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("install %s: %w", historyv1alpha1.SchemeGroupVersion, err)
	}
	return &Server{generic: generic, addr: config.SecureServing.Listener.Addr()}, nil
}

// applyAuth sets the server's authenticator and authorizer: o's when set, otherwise
// the API server's, through TokenReview and SubjectAccessReview, so that RBAC on
// pipelinerecords decides who reads which namespace's records. Requests the aggregator
// forwards carry the user in X-Remote-* headers, trusted from a client certificate
// signed by the front proxy's CA (requestheader-client-ca-file in
// kube-system/extension-apiserver-authentication).
func applyAuth(o Options, config *genericapiserver.Config) error {
	if o.Authn != nil {
		config.Authentication.Authenticator = o.Authn
	} else {
		authn := genericoptions.NewDelegatingAuthenticationOptions()
		authn.RemoteKubeConfigFile = o.Kubeconfig
		if err := authn.ApplyTo(&config.Authentication, config.SecureServing, nil); err != nil {
			return fmt.Errorf("delegate the history API's authentication to the API server: %w", err)
		}
		if rh := config.Authentication.RequestHeaderConfig; rh != nil {
			// The front proxy's CA comes from an informer that starts with the server;
			// until it has, the users the aggregator vouches for are taken for anonymous
			// (and refused by RBAC). Not ready until then.
			config.AddReadyzChecks(healthz.NamedCheck("front-proxy-client-ca", func(*http.Request) error {
				if len(rh.CAContentProvider.CurrentCABundleContent()) == 0 {
					return errors.New("the front proxy's client CA (requestheader-client-ca-file in kube-system/extension-apiserver-authentication) is not loaded yet")
				}
				return nil
			}))
		}
	}
	if o.Authz != nil {
		config.Authorization.Authorizer = o.Authz
		return nil
	}
	// The defaults let probes reach /healthz, /readyz and /livez unasked, and
	// system:masters everything, as the API server would.
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = o.Kubeconfig
	if err := authz.ApplyTo(&config.Authorization); err != nil {
		return fmt.Errorf("delegate the history API's authorization to the API server: %w", err)
	}
	return nil
}

// openAPIDefinitions is the stub model of the group's types: an object of any fields.
func openAPIDefinitions(openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
	object := func(description string) openapicommon.OpenAPIDefinition {
		return openapicommon.OpenAPIDefinition{Schema: spec.Schema{
			SchemaProps:      spec.SchemaProps{Type: []string{"object"}, Description: description},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}},
		}}
	}
	return map[string]openapicommon.OpenAPIDefinition{
		openapiutil.GetCanonicalTypeName(&historyv1alpha1.PipelineRecord{}):     object("What the archive keeps of one state of a pipeline."),
		openapiutil.GetCanonicalTypeName(&historyv1alpha1.PipelineRecordList{}): object("A page of records."),
	}
}

// Addr is where the server listens.
func (s *Server) Addr() net.Addr { return s.addr }

// Run serves until ctx is done, then shuts down: it stops taking requests and waits
// for those in flight (up to a minute, the request timeout).
func (s *Server) Run(ctx context.Context) error {
	if err := s.generic.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("serve the history API: %w", err)
	}
	return nil
}
