package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// errorBody is the body of every API error.
type errorBody struct {
	Error string `json:"error"`
}

// writeJSON answers v as JSON. encoding/json escapes <, > and & too: a string from the
// cluster cannot close a tag even if a page forgot to escape it.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// writeAPIError answers an error of a call to the API server with its status (403, 404,
// 409...) and message. A 401 of the API server (expired credentials) becomes a 502: 401
// here means a request without the dashboard's token.
func writeAPIError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Code != 0 {
		status = int(s.Status().Code)
	}
	if status == http.StatusUnauthorized {
		status = http.StatusBadGateway
	}
	writeError(w, status, err.Error())
}

// apiMessage is the API server's own message of err, without our wrapping.
func apiMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}
