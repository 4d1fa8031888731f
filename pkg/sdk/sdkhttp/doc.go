// Package sdkhttp maps what a plugin's HTTP call got to a hook's outcome, the same way in
// every plugin: Result for an answer, by its status, and Error for a call that got none.
//
//	resp, err := client.Do(req)
//	if err != nil {
//		return sdk.Result{}, sdkhttp.Error(err)
//	}
//	defer resp.Body.Close()
//	return sdkhttp.Result(resp, "instance terminated")
//
// Their messages never quote the URL (its user info, path or query may hold credentials),
// the answer's body or its reason phrase (the server's words, any bytes at all), nor the
// operating system's reason for a failed connection (a step's status is no port scanner):
// a status is named by its code and Go's text for it, "503 Service Unavailable". Outcomes
// names the reasons after a plugin ("WebhookRejected") and may name the request.
package sdkhttp
