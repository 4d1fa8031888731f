package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// ec2Namespace is the XML namespace of EC2 Query API responses.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// fakeEC2 is an in-test stand-in for the part of the EC2 Query API that the plugin uses:
// form-encoded POSTs with Action=DescribeInstances or TerminateInstances, signed with
// Signature Version 4 (checked against the one key it knows), answered with XML in the
// EC2 namespace or EC2's error XML. It is not EC2: it answers as the API reference says
// those calls answer.
type fakeEC2 struct {
	*httptest.Server
	accessKeyID, secretAccessKey, region string

	mu        sync.Mutex
	instances map[string]*fakeInstance
	// failStatus, when non-zero, is the HTTP status every request answers with
	// (failCode the EC2 error code in its body).
	failStatus int
	failCode   string
	calls      map[string]int
}

type fakeInstance struct {
	state string
	// name is the value of its Name tag; empty: no tag.
	name string
	// privateDNS is its private DNS name; addInstance gives it nodeName's.
	privateDNS string
	// shutdownPolls is how many DescribeInstances after a TerminateInstances still show
	// shutting-down before the instance is terminated, as a real shutdown takes a while.
	shutdownPolls int
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func newFakeEC2(t *testing.T, accessKeyID, secretAccessKey, region string) *fakeEC2 {
	t.Helper()
	f := &fakeEC2{accessKeyID: accessKeyID, secretAccessKey: secretAccessKey, region: region,
		instances: map[string]*fakeInstance{}, calls: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve)) // listens on 127.0.0.1
	t.Cleanup(f.Close)
	return f
}

func (f *fakeEC2) addInstance(id, state string, shutdownPolls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instances[id] = &fakeInstance{state: state, shutdownPolls: shutdownPolls, privateDNS: nodeName}
}

// renameInstance gives the instance another private DNS name ("": none, as EC2 shows a
// terminated instance).
func (f *fakeEC2) renameInstance(id, privateDNS string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instances[id].privateDNS = privateDNS
}

// nameInstance gives the instance a Name tag.
func (f *fakeEC2) nameInstance(id, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instances[id].name = name
}

func (f *fakeEC2) fail(status int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failStatus, f.failCode = status, code
}

func (f *fakeEC2) count(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[action]
}

// actions are the actions requested, and how many times each.
func (f *fakeEC2) actions() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

func (f *fakeEC2) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeError(w, http.StatusBadRequest, "InvalidRequest", "expected a form-encoded POST")
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequest", "malformed form")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	action := form.Get("Action")
	f.calls[action]++
	if f.failStatus != 0 {
		writeError(w, f.failStatus, f.failCode, "injected failure")
		return
	}
	if code, msg := f.authenticate(r, body); code != "" {
		writeError(w, http.StatusUnauthorized, code, msg)
		return
	}
	if form.Get("Version") != "2016-11-15" {
		writeError(w, http.StatusBadRequest, "InvalidParameterValue", "unexpected API version")
		return
	}
	id := form.Get("InstanceId.1")
	inst, ok := f.instances[id]
	if !ok {
		writeError(w, http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id))
		return
	}
	switch action {
	case "DescribeInstances":
		if inst.state == "shutting-down" {
			if inst.shutdownPolls > 0 {
				inst.shutdownPolls--
			} else {
				inst.state = "terminated"
			}
		}
		writeXML(w, describeResponse(id, inst.state, inst.name, inst.privateDNS))
	case "TerminateInstances":
		previous := inst.state
		if previous != "terminated" {
			inst.state = "shutting-down"
		}
		writeXML(w, terminateResponse(id, previous, inst.state))
	default:
		writeError(w, http.StatusBadRequest, "InvalidAction", "unsupported action "+action)
	}
}

// authenticate checks the request's Signature Version 4 as EC2 does: the access key must
// be known and the signature must be the one its secret key gives. It returns an EC2 error
// code and message, or "" if the request is authentic.
func (f *fakeEC2) authenticate(r *http.Request, body []byte) (code, msg string) {
	auth := r.Header.Get("Authorization")
	cred, signed := authField(auth, "Credential="), authField(auth, "SignedHeaders=")
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || signed == "" {
		return "AuthFailure", "AWS was not able to validate the provided access credentials"
	}
	if scope[0] != f.accessKeyID {
		return "AuthFailure", "AWS was not able to validate the provided access credentials"
	}
	if scope[2] != f.region || scope[3] != "ec2" {
		return "AuthFailure", "credential scope does not name this region and service"
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "AuthFailure", "missing or malformed X-Amz-Date"
	}
	// Sign a copy of the request with the headers it says it signed, and compare.
	clone, err := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return "AuthFailure", "unsignable request"
	}
	for _, h := range strings.Split(signed, ";") {
		if h != "host" && h != "content-length" {
			clone.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: f.accessKeyID, SecretAccessKey: f.secretAccessKey, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, clone, hex.EncodeToString(sum[:]), "ec2", f.region, when); err != nil {
		return "AuthFailure", "unsignable request"
	}
	if authField(clone.Header.Get("Authorization"), "Signature=") != authField(auth, "Signature=") {
		return "AuthFailure", "AWS was not able to validate the provided access credentials"
	}
	return "", ""
}

// authField returns the value of a field of an AWS4-HMAC-SHA256 Authorization header.
func authField(auth, field string) string {
	_, rest, ok := strings.Cut(auth, field)
	if !ok {
		return ""
	}
	value, _, _ := strings.Cut(rest, ",")
	return strings.TrimSpace(value)
}

type instanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

func state(name string) instanceState { return instanceState{Code: stateCodes[name], Name: name} }

func describeResponse(id, s, name, privateDNS string) any {
	type tag struct {
		Key   string `xml:"key"`
		Value string `xml:"value"`
	}
	type instance struct {
		InstanceID       string        `xml:"instanceId"`
		InstanceType     string        `xml:"instanceType"`
		InstanceState    instanceState `xml:"instanceState"`
		PrivateDNSName   string        `xml:"privateDnsName"`
		AvailabilityZone string        `xml:"placement>availabilityZone"`
		Tags             []tag         `xml:"tagSet>item"`
	}
	var tags []tag
	if name != "" {
		tags = []tag{{Key: "Name", Value: name}}
	}
	type reservation struct {
		ReservationID string     `xml:"reservationId"`
		Instances     []instance `xml:"instancesSet>item"`
	}
	return struct {
		XMLName      xml.Name      `xml:"DescribeInstancesResponse"`
		Xmlns        string        `xml:"xmlns,attr"`
		RequestID    string        `xml:"requestId"`
		Reservations []reservation `xml:"reservationSet>item"`
	}{Xmlns: ec2Namespace, RequestID: "req-describe", Reservations: []reservation{{
		ReservationID: "r-0123456789abcdef0",
		Instances:     []instance{{InstanceID: id, InstanceType: "m5.large", InstanceState: state(s), PrivateDNSName: privateDNS, AvailabilityZone: "us-east-1a", Tags: tags}},
	}}}
}

func terminateResponse(id, previous, current string) any {
	type change struct {
		InstanceID    string        `xml:"instanceId"`
		CurrentState  instanceState `xml:"currentState"`
		PreviousState instanceState `xml:"previousState"`
	}
	return struct {
		XMLName   xml.Name `xml:"TerminateInstancesResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Instances []change `xml:"instancesSet>item"`
	}{Xmlns: ec2Namespace, RequestID: "req-terminate", Instances: []change{{InstanceID: id, CurrentState: state(current), PreviousState: state(previous)}}}
}

func writeXML(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(v)
}

// writeError answers with EC2's error XML.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	type ec2Error struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(struct {
		XMLName   xml.Name   `xml:"Response"`
		Errors    []ec2Error `xml:"Errors>Error"`
		RequestID string     `xml:"RequestID"`
	}{Errors: []ec2Error{{Code: code, Message: msg}}, RequestID: "req-error"})
}
