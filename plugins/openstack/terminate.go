package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

const (
	executorName = "openstack.terminate-server"

	// pollInterval is how long to wait before looking again at a server being deleted:
	// Nova usually deletes a server within seconds to a minute.
	pollInterval = 5 * time.Second
	// requestTimeout bounds one HTTP request, so that a hung endpoint costs one retry
	// rather than the whole attempt of the hook.
	requestTimeout = 30 * time.Second

	// Output keys.
	outInstanceID         = "instanceID"
	outPreviousPowerState = "previousPowerState"
	outPreviousStatus     = "previousStatus"

	// unknownState is recorded when the server was already gone the first time this step
	// looked at it: its state before termination cannot be known.
	unknownState = "Unknown"
)

// Parameters of openstack.terminate-server.
const (
	paramProviderID        = "providerID"
	paramServerID          = "serverID"
	paramNode              = "node"
	paramCredentialsSecret = "credentialsSecret"
)

// Secret keys read from the data of the Secret named by credentialsSecret.
const (
	keyAuthURL             = "authURL"
	keyUsername            = "username"
	keyPassword            = "password"
	keyProjectName         = "projectName"
	keyProjectID           = "projectID"
	keyDomainName          = "domainName"
	keyRegion              = "region"
	keyAppCredentialID     = "applicationCredentialID"
	keyAppCredentialSecret = "applicationCredentialSecret"
)

// uuidPattern is the shape of a Nova server ID. Checking it keeps a malformed providerID
// from becoming a request for another URL path.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// terminateServer is openstack.terminate-server: Create deletes the server and reports done
// once Nova answers 404 for it. The other hooks are sdk.Base's no-ops: a deleted server
// cannot be brought back, so there is nothing to undo on the pipeline's teardown.
type terminateServer struct {
	sdk.Base
	httpClient http.Client
}

// newTerminateServer returns the executor. Every request to Keystone and Nova connects
// only where policy allows (the authURL is the Secret's, so a pipeline's author chooses
// it; Nova's URL is the catalog's that Keystone answers), through wrap (the plugin puts
// its rate limit there, tests their own).
func newTerminateServer(policy *egress.Policy, wrap func(http.RoundTripper) http.RoundTripper) *terminateServer {
	return &terminateServer{httpClient: http.Client{Transport: wrap(egress.LimitResponses(policy.Transport(nil), egress.MaxResponseBytes)), Timeout: requestTimeout}}
}

func (*terminateServer) Name() string { return executorName }

// Describe declares every parameter with its type: the engine (and the SDK's server)
// check a step's parameters against them before any hook, so that Create reads them with
// the request's accessors and checks only what the types cannot say.
func (*terminateServer) Describe() sdk.Description {
	return sdk.Description{
		Version:     "v0.1.0",
		Description: "Deletes an OpenStack Nova server and waits until Nova no longer knows it.",
		Parameters: []sdk.Parameter{
			{Name: paramProviderID, Type: sdk.ParamString, Description: "The Node's spec.providerID, openstack:///<server-id> (or openstack://<region>/<server-id>). Either this or serverID."},
			{Name: paramServerID, Type: sdk.ParamString, Description: "The Nova server ID (a UUID). Either this or providerID; when both are given they must agree."},
			{Name: paramNode, Type: sdk.ParamString, Required: true, Description: "The Node's name. A kubelet sets its Node's providerID itself, so the server is deleted only if it is this node's: its name, or its metadata hostname, is the node's name (case-insensitive, or the same short name before the first dot)."},
			{Name: paramCredentialsSecret, Type: sdk.ParamSecret, Required: true, Description: "Secret in the pipeline's namespace with keys authURL, username, password, projectName or projectID, domainName, optional region; or applicationCredentialID and applicationCredentialSecret instead of username and password."},
		},
	}
}

// Create is idempotent: a server that Nova no longer knows is done, a server being
// deleted is waited for, any other server is deleted.
func (t *terminateServer) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	l, err := t.lookup(ctx, req)
	if err != nil {
		return sdk.Result{}, err
	}
	id := l.serverID
	if l.server == nil {
		return sdk.DoneWithOutputs(fmt.Sprintf("server %s is gone", id), l.outputs), nil
	}
	if beingDeleted(l.server) {
		return waitResult(id, l.outputs), nil
	}
	err = servers.Delete(ctx, l.compute, id).ExtractErr()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return sdk.DoneWithOutputs(fmt.Sprintf("server %s is gone", id), l.outputs), nil
	}
	if err != nil {
		return sdk.Result{}, classify(fmt.Sprintf("delete server %s", id), err)
	}
	return waitResult(id, l.outputs), nil
}

// lookup is what Create and Plan both start from: the server the parameters name, as Nova
// shows it to the Secret's credentials in its region, and the step's outputs for it.
type lookup struct {
	target
	compute *gophercloud.ServiceClient
	// server is nil when Nova does not know the server (any more).
	server  *servers.Server
	outputs map[string]string
}

// lookup finds the step's server: the one definition of which server the step is about,
// so that a plan names the very server a run would delete, and fails where the run would
// (a malformed providerID, a Secret without a key, credentials Keystone refuses, a region
// without Nova).
func (t *terminateServer) lookup(ctx context.Context, req *sdk.Request) (lookup, error) {
	target, err := parseTarget(req)
	if err != nil {
		return lookup{}, err
	}
	creds, err := parseCredentials(req.Secret(paramCredentialsSecret))
	if err != nil {
		return lookup{}, err
	}
	if target.region != "" {
		// openstack://<region>/<id> says where the server is; the Secret's region is
		// the default for providerIDs without one.
		creds.region = target.region
	}
	compute, err := t.computeClient(ctx, creds)
	if err != nil {
		return lookup{}, err
	}

	// What this step saw first is kept in its outputs across the polls of a deletion.
	recorded := req.Outputs[req.Step]
	l := lookup{target: target, compute: compute, outputs: map[string]string{
		outInstanceID:         target.serverID,
		outPreviousPowerState: recordedOr(recorded, outPreviousPowerState, unknownState),
		outPreviousStatus:     recordedOr(recorded, outPreviousStatus, unknownState),
	}}

	server, err := servers.Get(ctx, compute, target.serverID).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return l, nil
	}
	if err != nil {
		return lookup{}, classify(fmt.Sprintf("get server %s", target.serverID), err)
	}
	if err := checkNodes(server, target); err != nil {
		return lookup{}, err
	}
	l.server = server
	if recorded[outPreviousStatus] == "" {
		l.outputs[outPreviousPowerState] = powerState(server)
		l.outputs[outPreviousStatus] = server.Status
	}
	return l, nil
}

// checkNodes refuses a server that is not the node's. A kubelet chooses its own Node's
// spec.providerID, so a compromised node could name another node's server: the server's
// own name (or the hostname in its metadata, for clouds that name servers otherwise) is
// what ties it to the Node. A server being deleted is refused too, so that the step never
// reports another node's server as its own.
func checkNodes(s *servers.Server, t target) error {
	if sameHost(s.Name, t.node) || sameHost(s.Metadata["hostname"], t.node) {
		return nil
	}
	return sdk.Permanent("ServerNotTheNodes", fmt.Errorf(
		"server %q (%s) is not node %q's server: neither its name nor its metadata hostname (%q) matches the node's name; "+
			"nothing was done, the server is not deleted (a kubelet sets its Node's providerID, which may name another node's server)",
		s.Name, t.serverID, t.node, s.Metadata["hostname"]))
}

// sameHost tells whether a server's name and a node's name are one host's: equal but for
// case, or with the same short name before the first dot (one may be an FQDN, as Nova's
// "name.novalocal" or a kubelet's --hostname-override often are).
func sameHost(name, node string) bool {
	if name == "" || node == "" {
		return false
	}
	short := func(s string) string {
		s, _, _ = strings.Cut(s, ".")
		return s
	}
	return strings.EqualFold(name, node) || (short(name) != "" && strings.EqualFold(short(name), short(node)))
}

// beingDeleted tells whether Nova is deleting the server already: it needs no second
// request, and Nova answers 404 once it is done.
func beingDeleted(s *servers.Server) bool {
	return s.Status == "DELETED" || s.TaskState == "deleting"
}

func waitResult(serverID string, outputs map[string]string) sdk.Result {
	r := sdk.Wait(pollInterval, fmt.Sprintf("deleting server %s (was %s)", serverID, outputs[outPreviousStatus]))
	r.Outputs = outputs
	return r
}

// computeClient authenticates with Keystone and returns a Nova client. Each hook
// authenticates anew: the plugin holds no token between hooks, and a rotated Secret takes
// effect at the next hook.
func (t *terminateServer) computeClient(ctx context.Context, c credentials) (*gophercloud.ServiceClient, error) {
	provider, err := openstack.NewClient(c.auth.IdentityEndpoint)
	if err != nil {
		return nil, sdk.Permanent("InvalidCredentials", fmt.Errorf("secret key %s: %w", keyAuthURL, egress.RedactError(err)))
	}
	provider.HTTPClient = t.httpClient
	if err := openstack.Authenticate(ctx, provider, c.auth); err != nil {
		// The authURL may carry credentials in its user info or query: messages never
		// show them.
		return nil, classify("authenticate with Keystone at "+egress.RedactURL(c.auth.IdentityEndpoint), err)
	}
	compute, err := openstack.NewComputeV2(provider, gophercloud.EndpointOpts{Region: c.region})
	if err != nil {
		// The catalog has no compute endpoint in this region: a configuration error.
		return nil, sdk.Permanent("ComputeEndpointNotFound", fmt.Errorf("find the compute endpoint (region %q) in the Keystone catalog: %w", c.region, err))
	}
	return compute, nil
}

// target is the server to delete.
type target struct {
	serverID string
	// node is the name of the Node whose server it must be.
	node string
	// region comes from a providerID of the form openstack://<region>/<id>, if any.
	region string
}

// parseTarget reads the parameters, which the engine checked against Describe, and checks
// what their types do not say: which server.
func parseTarget(req *sdk.Request) (target, error) {
	serverID, providerID := strings.TrimSpace(req.String(paramServerID)), strings.TrimSpace(req.String(paramProviderID))
	node := strings.TrimSpace(req.String(paramNode))
	if node == "" {
		// The engine refuses a missing node; a blank one would match no server anyway.
		return target{}, sdk.Permanent("InvalidParameter", errors.New("parameter node is blank: the server is deleted only if it is this node's"))
	}
	var t target
	if providerID != "" {
		u, err := url.Parse(providerID)
		id := ""
		if err == nil {
			id = strings.TrimPrefix(u.Path, "/")
		}
		if err != nil || u.Scheme != "openstack" || !uuidPattern.MatchString(id) {
			return target{}, sdk.Permanent("InvalidProviderID", fmt.Errorf("providerID %q is not of the form openstack:///<server-uuid>", providerID))
		}
		t = target{serverID: id, region: u.Host}
	}
	switch {
	case serverID == "" && providerID == "":
		return target{}, sdk.Permanent("InvalidParameter", errors.New("one of the parameters providerID and serverID is required (a Node without spec.providerID needs serverID)"))
	case serverID != "" && !uuidPattern.MatchString(serverID):
		return target{}, sdk.Permanent("InvalidParameter", fmt.Errorf("parameter serverID %q is not a server UUID", serverID))
	case serverID != "" && providerID != "" && !strings.EqualFold(serverID, t.serverID):
		return target{}, sdk.Permanent("InvalidParameter", fmt.Errorf("parameters serverID %q and providerID %q name different servers", serverID, providerID))
	case serverID != "" && providerID == "":
		t.serverID = serverID
	}
	t.node = node
	return t, nil
}

// credentials are Keystone authentication options and the region of the compute endpoint.
type credentials struct {
	auth   gophercloud.AuthOptions
	region string
}

func parseCredentials(secrets map[string][]byte) (credentials, error) {
	get := func(key string) string { return strings.TrimSpace(string(secrets[key])) }
	missing := func(keys ...string) error {
		return sdk.Permanent("MissingCredentials", fmt.Errorf(
			"the Secret named by parameter credentialsSecret lacks key(s) %s", strings.Join(keys, ", ")))
	}
	c := credentials{region: get(keyRegion), auth: gophercloud.AuthOptions{IdentityEndpoint: get(keyAuthURL)}}
	if c.auth.IdentityEndpoint == "" {
		return credentials{}, missing(keyAuthURL)
	}
	if id := get(keyAppCredentialID); id != "" {
		// An application credential carries its own project scope.
		c.auth.ApplicationCredentialID = id
		c.auth.ApplicationCredentialSecret = get(keyAppCredentialSecret)
		if c.auth.ApplicationCredentialSecret == "" {
			return credentials{}, missing(keyAppCredentialSecret)
		}
		return c, nil
	}
	c.auth.Username, c.auth.Password = get(keyUsername), get(keyPassword)
	c.auth.DomainName = get(keyDomainName)
	c.auth.TenantName, c.auth.TenantID = get(keyProjectName), get(keyProjectID)
	var absent []string
	if c.auth.Username == "" {
		absent = append(absent, keyUsername)
	}
	if c.auth.Password == "" {
		absent = append(absent, keyPassword)
	}
	if c.auth.TenantName == "" && c.auth.TenantID == "" {
		absent = append(absent, keyProjectName+" (or "+keyProjectID+")")
	}
	if c.auth.DomainName == "" {
		absent = append(absent, keyDomainName)
	}
	if len(absent) > 0 {
		return credentials{}, missing(absent...)
	}
	return c, nil
}

// powerState names the server's power state when Nova reports it (OS-EXT-STS, visible
// under the default policy), and falls back to the server's status.
func powerState(s *servers.Server) string {
	if s.PowerState != servers.NOSTATE {
		return s.PowerState.String()
	}
	return s.Status
}

func recordedOr(recorded map[string]string, key, fallback string) string {
	if v := recorded[key]; v != "" {
		return v
	}
	return fallback
}
