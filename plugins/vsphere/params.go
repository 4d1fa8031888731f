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
	providerIDPrefix       = "vsphere://"
	defaultShutdownTimeout = 5 * time.Minute
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
	return sdk.Permanent("InvalidParameter", fmt.Errorf(format, args...))
}

func parseParams(in map[string]string) (params, error) {
	p := params{
		node:            in[paramNode],
		secret:          in[paramCredentialsSecret],
		shutdownTimeout: defaultShutdownTimeout,
		datacenter:      in[paramDatacenter],
	}
	if id := in[paramProviderID]; id != "" {
		uuid, ok := strings.CutPrefix(id, providerIDPrefix)
		if !ok || !biosUUID.MatchString(uuid) {
			return p, invalidParameter("parameter %s: %q is not a vSphere providerID such as %s4201c0de-1234-5678-9abc-def012345678", paramProviderID, id, providerIDPrefix)
		}
		p.uuid = strings.ToLower(uuid)
	}
	if p.uuid == "" && p.node == "" {
		return p, invalidParameter("parameter %s or %s is required to find the VM", paramProviderID, paramNode)
	}
	if p.secret == "" {
		return p, invalidParameter("parameter %s is required: the Secret with the vCenter url, username and password", paramCredentialsSecret)
	}
	if v := in[paramShutdownTimeout]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return p, invalidParameter("parameter %s: %q is not a duration such as 5m", paramShutdownTimeout, v)
		}
		p.shutdownTimeout = d
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

// parseCredentials reads the Secret's data (req.Secrets); secret names it in messages.
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
