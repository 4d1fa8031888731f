// Command stepwise-plugin-httpcheck serves http.ready: Create waits until a URL answers
// 2xx, or fails once the step's own timeout parameter has passed since its first call.
package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

type ready struct {
	sdk.Base
	client *http.Client
}

func (ready) Name() string { return "http.ready" }

func (ready) Describe() sdk.Description {
	return sdk.Description{Version: "v0.1.0", Description: "Waits until a URL answers 2xx to a GET.", Parameters: []sdk.Parameter{
		{Name: "url", Type: sdk.ParamURL, Required: true, Description: "The URL to GET."},
		{Name: "timeout", Type: sdk.ParamDuration, Default: "5m", Description: "How long to wait for a 2xx."},
		{Name: "interval", Type: sdk.ParamDuration, Default: "10s", Description: "How often to ask."},
	}}
}

// Create asks once per call; the step waits between calls, so it never blocks.
func (r ready) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	waited := time.Since(req.HookStarted).Round(time.Second)
	if waited > req.Duration("timeout") {
		return sdk.Result{}, sdk.Permanent("NotReady", fmt.Errorf("no 2xx answer within %s", req.Duration("timeout")))
	}
	// The URL was checked (absolute http or https) before the hook: the request is valid.
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, req.URL("url").String(), nil)
	resp, err := r.client.Do(get)
	if err != nil {
		return sdk.Wait(req.Duration("interval"), fmt.Sprintf("not ready after %s: %v", waited, sdkhttp.Error(err))), nil
	}
	defer func() { _ = resp.Body.Close() }()
	res, err := sdkhttp.Result(resp, "ready")
	if err != nil || !res.Done {
		return sdk.Wait(req.Duration("interval"), fmt.Sprintf("not ready after %s: %s", waited, sdkhttp.StatusText(resp.StatusCode))), nil
	}
	return res, nil
}

func main() { sdk.Serve(ready{client: sdkhttp.Client()}) }
