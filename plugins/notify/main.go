// Command stepwise-plugin-notify serves notify.post: on Create and on the teardown's
// Delete it POSTs a line of text to a URL kept in a Secret (a chat webhook's URL is its
// credential).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

type post struct {
	sdk.Base
	client *http.Client
}

func (post) Name() string { return "notify.post" }

func (post) Describe() sdk.Description {
	return sdk.Description{Version: "v0.1.0", Description: "POSTs a message to a URL kept in a Secret, on create and teardown.", Parameters: []sdk.Parameter{
		{Name: "urlSecret", Type: sdk.ParamSecret, Required: true, Description: "Secret whose key url is the URL to POST to."},
		{Name: "message", Type: sdk.ParamString, Required: true, Description: "What to say on create."},
		{Name: "onDelete", Type: sdk.ParamString, Default: "torn down", Description: "What to say on teardown."},
	}}
}

func (p post) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	return p.send(ctx, req, req.String("message"))
}

func (p post) Delete(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	return p.send(ctx, req, req.String("onDelete"))
}

// send returns net/http's errors as they are: the SDK removes the Secret's URL from them.
func (p post) send(ctx context.Context, req *sdk.Request, text string) (sdk.Result, error) {
	url := strings.TrimSpace(string(req.Secret("urlSecret")["url"]))
	body, _ := json.Marshal(map[string]string{"text": text}) // a map of strings always encodes
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return sdk.Result{}, sdk.Permanent(sdk.ReasonInvalidParameter, err)
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(r)
	if err != nil {
		return sdk.Result{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	return sdkhttp.Result(resp, "sent")
}

func main() { sdk.Serve(post{client: sdkhttp.Client()}) }
