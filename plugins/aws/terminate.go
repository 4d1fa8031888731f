package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

const (
	executorName = "aws.terminate-instance"

	// pollInterval is how long to wait before looking again at an instance shutting
	// down: EC2 usually terminates an instance within a minute or two.
	pollInterval = 10 * time.Second
	// requestTimeout bounds one HTTP request, so that a hung endpoint costs one retry
	// rather than the whole attempt of the hook.
	requestTimeout = 30 * time.Second
	// sdkMaxAttempts keeps the SDK's own retries low (one retry of a blip, after at most
	// sdkMaxBackoff): the engine's retry policy, with the step's limit and backoff, is
	// what retries a failing hook.
	sdkMaxAttempts = 2
	sdkMaxBackoff  = time.Second

	// Output keys.
	outInstanceID         = "instanceID"
	outPreviousPowerState = "previousPowerState"

	// unknownState is recorded when the instance was already gone the first time this
	// step looked at it: its state before termination cannot be known.
	unknownState = "Unknown"
)

// Parameters of aws.terminate-instance.
const (
	paramProviderID        = "providerID"
	paramInstanceID        = "instanceID"
	paramRegion            = "region"
	paramEndpoint          = "endpoint"
	paramCredentialsSecret = "credentialsSecret"
	paramNode              = "node"
)

// Secret keys read from the data of the Secret named by credentialsSecret.
const (
	keyAccessKeyID     = "accessKeyID"
	keySecretAccessKey = "secretAccessKey"
	keySessionToken    = "sessionToken"
)

var (
	// instanceIDPattern is the shape of an EC2 instance ID (i- and 8 or 17 hex digits;
	// EC2-compatible clouds use the same prefix with other lengths).
	instanceIDPattern = regexp.MustCompile(`^i-[0-9a-zA-Z]{1,64}$`)
	// regionOfZone takes the region out of a zone name: us-east-1a, us-west-2-lax-1a (a
	// Local Zone) and us-gov-west-1a all start with their region.
	regionOfZone = regexp.MustCompile(`^([a-z]{2}(?:-[a-z]+)+-[0-9]+)`)
)

// terminateInstance is aws.terminate-instance: Create terminates the instance and reports
// done once EC2 says it is terminated. The other hooks are sdk.Base's no-ops: a terminated
// instance cannot be brought back, so there is nothing to undo on the pipeline's teardown.
type terminateInstance struct {
	sdk.Base
	httpClient *http.Client
}

// newTerminateInstance returns the executor. Every request to EC2 connects only where
// policy allows (the parameter endpoint is the pipeline author's choice), over the SDK's
// default transport settings, through wrap (the plugin puts its rate limit there, tests
// their own).
func newTerminateInstance(policy *egress.Policy, wrap func(http.RoundTripper) http.RoundTripper) *terminateInstance {
	transport := policy.Transport(awshttp.NewBuildableClient().GetTransport())
	return &terminateInstance{httpClient: &http.Client{Transport: wrap(egress.LimitResponses(transport, egress.MaxResponseBytes)), Timeout: requestTimeout}}
}

func (*terminateInstance) Name() string { return executorName }

// Describe declares every parameter with its type: the engine (and the SDK's server)
// check a step's parameters against them before any hook, so that Create reads them with
// the request's accessors and checks only what the types cannot say.
func (*terminateInstance) Describe() sdk.Description {
	return sdk.Description{
		Version:     "v0.1.0",
		Description: "Terminates an AWS EC2 instance (or one of an EC2-compatible cloud) and waits until it is terminated.",
		Parameters: []sdk.Parameter{
			{Name: paramProviderID, Type: sdk.ParamString, Description: "The Node's spec.providerID, aws:///<zone>/<instance-id>. Either this or instanceID."},
			{Name: paramInstanceID, Type: sdk.ParamString, Description: "The EC2 instance ID (i-...). Either this or providerID; when both are given they must agree."},
			{Name: paramRegion, Type: sdk.ParamString, Description: "The AWS region, e.g. us-east-1. Required unless the providerID's zone names it (us-east-1a → us-east-1)."},
			{Name: paramEndpoint, Type: sdk.ParamURL, Description: "Base URL of an EC2-compatible API to use instead of AWS's (private clouds)."},
			{Name: paramCredentialsSecret, Type: sdk.ParamSecret, Required: true, Description: "Secret in the pipeline's namespace with keys accessKeyID, secretAccessKey and optional sessionToken."},
			{Name: paramNode, Type: sdk.ParamString, Required: true, Description: "The Node's name. A kubelet sets its own Node's providerID, so the instance is terminated only if its private DNS name (or the short name before its first dot) or its Name tag is this name."},
		},
	}
}

// Create is idempotent: an instance that is terminated (or unknown to EC2) is done, one
// shutting down is waited for, any other is terminated.
func (t *terminateInstance) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	l, err := t.lookup(ctx, req)
	if err != nil {
		return sdk.Result{}, err
	}
	id := l.instanceID
	gone := sdk.DoneWithOutputs(fmt.Sprintf("instance %s is terminated", id), l.outputs)
	if l.instance == nil {
		return gone, nil
	}
	state := l.instance.State.Name
	switch state {
	case types.InstanceStateNameTerminated:
		return gone, nil
	case types.InstanceStateNameShuttingDown:
		return waitResult(id, state, l.outputs), nil
	}
	if err := l.checkNodesInstance(); err != nil {
		return sdk.Result{}, err
	}

	out, err := l.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if isNotFound(err) {
			return gone, nil
		}
		return sdk.Result{}, classify(fmt.Sprintf("terminate instance %s", id), err)
	}
	current := types.InstanceStateNameShuttingDown
	for _, change := range out.TerminatingInstances {
		if aws.ToString(change.InstanceId) == id && change.CurrentState != nil {
			current = change.CurrentState.Name
		}
	}
	if current == types.InstanceStateNameTerminated {
		return gone, nil
	}
	return waitResult(id, current, l.outputs), nil
}

// lookup is what Create and Plan both start from: the instance the parameters name, as
// EC2 describes it with the Secret's key in its region, and the step's outputs for it.
type lookup struct {
	target
	client *ec2.Client
	// instance is nil when EC2 does not know the instance (any more); otherwise its State
	// is set.
	instance *types.Instance
	outputs  map[string]string
}

// lookup finds the step's instance: the one definition of which instance the step is
// about, so that a plan names the very instance a run would terminate, and fails where the
// run would (a malformed providerID, a Secret without a key, a key EC2 refuses).
func (t *terminateInstance) lookup(ctx context.Context, req *sdk.Request) (lookup, error) {
	tgt, err := parseTarget(req)
	if err != nil {
		return lookup{}, err
	}
	client, err := t.client(req.Secret(paramCredentialsSecret), tgt)
	if err != nil {
		return lookup{}, err
	}
	// What this step saw first is kept in its outputs across the polls of a termination.
	recorded := req.Outputs[req.Step][outPreviousPowerState]
	l := lookup{target: tgt, client: client,
		outputs: map[string]string{outInstanceID: tgt.instanceID, outPreviousPowerState: cmp.Or(recorded, unknownState)}}

	l.instance, err = describeInstance(ctx, client, tgt.instanceID)
	switch {
	case isNotFound(err):
		return l, nil
	case err != nil:
		return lookup{}, classify(fmt.Sprintf("describe instance %s", tgt.instanceID), err)
	}
	if recorded == "" {
		l.outputs[outPreviousPowerState] = string(l.instance.State.Name)
	}
	return l, nil
}

// checkNodesInstance refuses to terminate an instance that is not the node's: a kubelet
// chooses its own Node's providerID, so a compromised node could name another node's
// instance. The instance is the node's if its private DNS name (EC2's default node name),
// or that name's first label, or its Name tag is the node's name. Only an instance about to
// be terminated is checked: EC2 clears the private DNS name of a terminated instance, and
// one shutting down is only waited for.
func (l lookup) checkNodesInstance() error {
	dns := aws.ToString(l.instance.PrivateDnsName)
	short, _, _ := strings.Cut(dns, ".")
	tag := nameTag(l.instance)
	for _, name := range []string{dns, short, tag} {
		if name != "" && strings.EqualFold(name, l.node) {
			return nil
		}
	}
	return sdk.Permanent("InstanceNotTheNodes", fmt.Errorf(
		"instance %s is not node %q's: neither its private DNS name %q nor its Name tag %q is the node's name; nothing was done",
		l.instanceID, l.node, dns, tag))
}

func waitResult(instanceID string, state types.InstanceStateName, outputs map[string]string) sdk.Result {
	r := sdk.Wait(pollInterval, fmt.Sprintf("instance %s is %s (was %s)", instanceID, state, outputs[outPreviousPowerState]))
	r.Outputs = outputs
	return r
}

// describeInstance returns the instance, with its state; an instance EC2 no longer lists
// is reported as InvalidInstanceID.NotFound, as EC2 does.
func describeInstance(ctx context.Context, client *ec2.Client, instanceID string) (*types.Instance, error) {
	out, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return nil, err
	}
	for _, r := range out.Reservations {
		for i := range r.Instances {
			if aws.ToString(r.Instances[i].InstanceId) == instanceID && r.Instances[i].State != nil {
				return &r.Instances[i], nil
			}
		}
	}
	return nil, errNotListed
}

// errNotListed is an answer without the instance asked for: it is gone.
var errNotListed = errors.New("instance not listed")

// client returns an EC2 client with the Secret's access key. The credentials come only
// from the Secret, never from the plugin's environment: a pipeline acts with what its
// service account may read, not with the operator's identity.
func (t *terminateInstance) client(secrets map[string][]byte, tgt target) (*ec2.Client, error) {
	get := func(key string) string { return strings.TrimSpace(string(secrets[key])) }
	var missing []string
	for _, k := range []string{keyAccessKeyID, keySecretAccessKey} {
		if get(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, sdk.Permanent("MissingCredentials", fmt.Errorf(
			"the Secret named by parameter credentialsSecret lacks key(s) %s", strings.Join(missing, ", ")))
	}
	opts := ec2.Options{
		Region:      tgt.region,
		Credentials: credentials.NewStaticCredentialsProvider(get(keyAccessKeyID), get(keySecretAccessKey), get(keySessionToken)),
		HTTPClient:  t.httpClient,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = sdkMaxAttempts
			o.MaxBackoff = sdkMaxBackoff
			// An address the egress policy refuses is refused again: no second attempt.
			o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(notRefused)}, o.Retryables...)
		}),
	}
	if tgt.endpoint != "" {
		opts.BaseEndpoint = aws.String(tgt.endpoint)
	}
	return ec2.New(opts), nil
}

// target is the instance to terminate, the Node it must be the instance of, and where its
// API is.
type target struct {
	instanceID string
	node       string
	region     string
	endpoint   string
}

// parseTarget reads the parameters, which the engine checked against Describe (the
// endpoint is an http(s) URL), and checks what their types do not say: which instance,
// in which region.
func parseTarget(req *sdk.Request) (target, error) {
	instanceID, providerID := strings.TrimSpace(req.String(paramInstanceID)), strings.TrimSpace(req.String(paramProviderID))
	t := target{node: strings.TrimSpace(req.String(paramNode)), region: strings.TrimSpace(req.String(paramRegion)), endpoint: req.String(paramEndpoint)}
	if t.node == "" {
		// Required: the engine refuses "", not a name of blanks.
		return target{}, sdk.Permanent("InvalidParameter", errors.New("parameter node is required: the instance is terminated only if it is the node's"))
	}
	zone := ""
	if providerID != "" {
		id, z, err := parseProviderID(providerID)
		if err != nil {
			return target{}, err
		}
		t.instanceID, zone = id, z
	}
	switch {
	case instanceID == "" && providerID == "":
		return target{}, sdk.Permanent("InvalidParameter", errors.New("one of the parameters providerID and instanceID is required (a Node without spec.providerID needs instanceID)"))
	case instanceID != "" && !instanceIDPattern.MatchString(instanceID):
		return target{}, sdk.Permanent("InvalidParameter", fmt.Errorf("parameter instanceID %q is not an instance ID (i-...)", instanceID))
	case instanceID != "" && providerID != "" && instanceID != t.instanceID:
		return target{}, sdk.Permanent("InvalidParameter", fmt.Errorf("parameters instanceID %q and providerID %q name different instances", instanceID, providerID))
	case instanceID != "":
		t.instanceID = instanceID
	}
	if t.region == "" {
		if m := regionOfZone.FindStringSubmatch(zone); m != nil {
			t.region = m[1]
		}
	}
	if t.region == "" {
		return target{}, sdk.Permanent("InvalidParameter", errors.New("parameter region is required: the providerID names no zone it can be derived from"))
	}
	return t, nil
}

// parseProviderID reads aws:///<zone>/<instance-id> (the form the AWS cloud provider
// sets), also without the zone (aws:///<instance-id>) or with a host (aws://<zone>/<id>).
func parseProviderID(providerID string) (instanceID, zone string, err error) {
	bad := sdk.Permanent("InvalidProviderID", fmt.Errorf("providerID %q is not of the form aws:///<zone>/<instance-id>", providerID))
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return "", "", bad
	}
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	switch len(parts) {
	case 1:
		instanceID = parts[0]
	case 2:
		zone, instanceID = parts[0], parts[1]
	default:
		return "", "", bad
	}
	if !instanceIDPattern.MatchString(instanceID) {
		return "", "", bad
	}
	return instanceID, zone, nil
}
