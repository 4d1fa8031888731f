package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

const executorName = "ticket.approval"

// approval is ticket.approval: Create opens a change ticket and waits for its approval;
// Delete closes it. The other hooks are sdk.Base's no-ops.
type approval struct {
	sdk.Base
	client *http.Client
}

func (approval) Name() string { return executorName }

func (approval) Describe() sdk.Description {
	return sdk.Description{Version: "v0.1.0", Description: "Opens a change ticket and waits until it is approved; closes it on teardown.", Parameters: []sdk.Parameter{
		{Name: "url", Type: sdk.ParamURL, Required: true, Description: "Base URL of the ticket API."},
		{Name: "tokenSecret", Type: sdk.ParamSecret, Description: "Secret whose key token is sent as a bearer token."},
		{Name: "summary", Type: sdk.ParamString, Required: true, Description: "The ticket's summary."},
		{Name: "approvalTimeout", Type: sdk.ParamDuration, Default: "30m", Description: "How long to wait for approval, from the step's start."},
		{Name: "interval", Type: sdk.ParamDuration, Default: "10s", Description: "How often to look at the ticket."},
	}}
}

// Create opens the ticket once, recording it on that call, then looks at it on each call.
func (a approval) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	// The SDK refuses an empty summary; a ticket titled with spaces is no better.
	summary := strings.TrimSpace(req.String("summary"))
	if summary == "" {
		return sdk.Result{}, sdk.Permanent(sdk.ReasonInvalidParameter, errors.New(`parameter "summary" is blank`))
	}
	remote, err := a.api(req)
	if err != nil {
		return sdk.Result{}, err
	}
	interval := req.Duration("interval")
	id := req.Created["ticket"]
	if id == "" {
		// The key makes the call after a crash (same key, no record) find this ticket.
		t, res, err := remote.open(ctx, req.IdempotencyKey, summary)
		if err != nil || !res.Done {
			return res, err
		}
		msg := fmt.Sprintf("ticket %s opened, waiting for approval", t.ID)
		return sdk.Wait(interval, msg).WithCreated(map[string]string{"ticket": t.ID}), nil
	}
	t, res, err := remote.get(ctx, id)
	if err != nil || !res.Done {
		return res, err
	}
	switch t.Status {
	case statusApproved:
		return sdk.DoneWithOutputs("ticket "+id+" approved", map[string]string{"ticketID": id}), nil
	case statusRejected:
		return sdk.Result{}, sdk.Permanent("TicketRejected", fmt.Errorf("ticket %s was rejected", id))
	case statusOpen:
		timeout := req.Duration("approvalTimeout")
		waited := time.Since(stepStarted(req)).Round(time.Second)
		if waited > timeout {
			return sdk.Result{}, sdk.Permanent("ApprovalTimeout", fmt.Errorf("ticket %s not approved within %s", id, timeout))
		}
		return sdk.Wait(interval, fmt.Sprintf("ticket %s open: waited %s of %s for approval", id, waited, timeout)), nil
	case statusClosed:
		return sdk.Result{}, sdk.Permanent("TicketClosed", fmt.Errorf("ticket %s was closed before it was approved", id))
	default:
		return sdk.Result{}, sdk.Retryable("TicketAPIBadAnswer", fmt.Errorf("ticket %s has an unknown status", id))
	}
}

// Delete closes what Create recorded: State would be gone by now.
func (a approval) Delete(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	id := req.Created["ticket"]
	if id == "" {
		return sdk.Done("no ticket was opened"), nil
	}
	remote, err := a.api(req)
	if err != nil {
		return sdk.Result{}, err
	}
	return remote.close(ctx, id)
}

// api is the ticket API the step's parameters name.
func (a approval) api(req *sdk.Request) (api, error) {
	remote := api{client: a.client, base: req.URL("url")}
	if req.String("tokenSecret") == "" {
		return remote, nil
	}
	remote.token = strings.TrimSpace(string(req.Secret("tokenSecret")["token"]))
	if remote.token == "" {
		return api{}, sdk.Permanent(sdk.ReasonInvalidParameter, errors.New(`the Secret that parameter "tokenSecret" names has no key token`))
	}
	return remote, nil
}

// stepStarted is when the approval window opened: the step's start, which a retry does
// not restart (HookStarted would give a rejected-then-retried step a fresh window).
func stepStarted(req *sdk.Request) time.Time {
	switch {
	case !req.StepStarted.IsZero():
		return req.StepStarted
	case !req.HookStarted.IsZero():
		return req.HookStarted
	default:
		return time.Now()
	}
}
