package main

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Parameter names of vsphere.terminate-vm.
const (
	paramProviderID        = "providerID"
	paramNode              = "node"
	paramCredentialsSecret = "credentialsSecret"
	paramShutdownTimeout   = "shutdownTimeout"
	paramDatacenter        = "datacenter"
)

// Keys of the credentials Secret.
const (
	keyURL      = "url"
	keyUsername = "username"
	keyPassword = "password"
	keyCA       = "ca.crt"
	keyInsecure = "insecure"
)

const (
	providerIDPrefix = "vsphere://"
	// defaultShutdownTimeout is the declared default of shutdownTimeout.
	defaultShutdownTimeout = "5m"
)

// biosUUID is the form of a VM's BIOS UUID (config.uuid) in a providerID.
var biosUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

type params struct {
	// uuid is the BIOS UUID from the providerID; empty when none was given.
	uuid            string
	node            string
	secret          string
	shutdownTimeout time.Duration
	datacenter      string
}

func invalidParameter(format string, args ...any) error {
	return sdk.Permanent(sdk.ReasonInvalidParameter, fmt.Errorf(format, args...))
}

// declarations are the parameters of vsphere.terminate-vm. The SDK checks a step's
// parameters against them before any hook (types, the Secret required, the default
// shutdownTimeout), so parseParams checks only what their types do not say.
func declarations() []sdk.Parameter {
	return []sdk.Parameter{
		{Name: paramProviderID, Type: sdk.ParamString, Description: "The Node's spec.providerID, vsphere://<BIOS UUID> (node.cordon outputs it as providerID); the VM is looked up by this UUID, and destroyed only if its name or its guest's hostname is node's (node is required with it)."},
		{Name: paramNode, Type: sdk.ParamString, Description: "The node name: the VM is looked up by this name when providerID is empty (never when a providerID matches no VM: that VM is gone); with providerID, the VM found must be this node's. One of providerID and node is required; node is required with providerID."},
		{Name: paramCredentialsSecret, Type: sdk.ParamSecret, Required: true, Description: "A Secret in the pipeline's namespace with keys url (https://HOST/sdk), username, password, optional ca.crt (PEM) and optional insecure (\"true\" skips TLS verification)."},
		{Name: paramShutdownTimeout, Type: sdk.ParamDuration, Default: defaultShutdownTimeout, Description: "How long the guest may take to shut down before the VM is powered off, counted from the start of the step's attempt (0s powers off at once)."},
		{Name: paramDatacenter, Type: sdk.ParamString, Description: "Limits the search to this datacenter (default: all)."},
	}
}

// parseParams reads the parameters of req, which the SDK checked against declarations.
func parseParams(req *sdk.Request) (params, error) {
	p := params{
		node:            req.String(paramNode),
		secret:          req.String(paramCredentialsSecret),
		shutdownTimeout: req.Duration(paramShutdownTimeout),
		datacenter:      req.String(paramDatacenter),
	}
	if id := req.String(paramProviderID); id != "" {
		uuid, ok := strings.CutPrefix(id, providerIDPrefix)
		if !ok || !biosUUID.MatchString(uuid) {
			return p, invalidParameter("parameter %s: %q is not a vSphere providerID such as %s4201c0de-1234-5678-9abc-def012345678", paramProviderID, id, providerIDPrefix)
		}
		p.uuid = strings.ToLower(uuid)
	}
	if p.uuid == "" && p.node == "" {
		return p, invalidParameter("parameter %s or %s is required to find the VM", paramProviderID, paramNode)
	}
	// A kubelet chooses its Node's providerID: the node's name is what the VM found by
	// it is checked against, so that a Node cannot have another node's VM destroyed.
	if p.uuid != "" && p.node == "" {
		return p, invalidParameter("parameter %s is required with %s: the VM the providerID names is destroyed only if it is the node's", paramNode, paramProviderID)
	}
	if p.shutdownTimeout < 0 {
		return p, invalidParameter("parameter %s: %q is not a duration of 0s or more such as 5m", paramShutdownTimeout, req.String(paramShutdownTimeout))
	}
	return p, nil
}

// credentials are what the plugin needs to log in to vCenter, from the Secret the operator
// read for it. They are never logged nor put in a message.
type credentials struct {
	url      *url.URL
	username string
	password string
	// roots verifies vCenter's certificate; nil means the system's roots.
	roots    *x509.CertPool
	insecure bool
}

// parseCredentials reads the data of the credentials Secret; secret names it in messages.
func parseCredentials(data map[string][]byte, secret string) (credentials, error) {
	var missing []string
	for _, k := range []string{keyURL, keyUsername, keyPassword} {
		if len(data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return credentials{}, invalidParameter("Secret %q lacks the key(s) %s", secret, strings.Join(missing, ", "))
	}
	// The value is not quoted in messages: a password may have been pasted into it.
	badURL := invalidParameter("key %s of Secret %q is not a vCenter URL such as https://HOST/sdk", keyURL, secret)
	u, err := soap.ParseURL(strings.TrimSpace(string(data[keyURL])))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return credentials{}, badURL
	}
	// Only the username and password keys authenticate; user info in the URL would end
	// up in error messages.
	u.User = nil
	c := credentials{url: u, username: string(data[keyUsername]), password: string(data[keyPassword])}
	if v := strings.TrimSpace(string(data[keyInsecure])); v != "" {
		if c.insecure, err = strconv.ParseBool(v); err != nil {
			return credentials{}, invalidParameter("key %s of Secret %q: %q is not true or false", keyInsecure, secret, v)
		}
	}
	if pem := data[keyCA]; len(pem) > 0 {
		c.roots = x509.NewCertPool()
		if !c.roots.AppendCertsFromPEM(pem) {
			return credentials{}, invalidParameter("key %s of Secret %q holds no PEM certificate", keyCA, secret)
		}
	}
	return c, nil
}
