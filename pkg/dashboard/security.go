package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// TokenHeader carries the token on API requests. A cross-site page cannot set it without a
// CORS preflight, which the dashboard never grants: it is also what makes the actions
// CSRF-safe.
const TokenHeader = "X-Stepwise-Token"

// contentSecurityPolicy allows the page only its own files: no inline script or style, no
// other origin, no framing (clickjacking).
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; " +
	"script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

// tokenMatcher compares tokens in constant time. Comparing digests rather than the tokens
// also hides the token's length.
type tokenMatcher [sha256.Size]byte

func newTokenMatcher(token string) tokenMatcher { return sha256.Sum256([]byte(token)) }

func (m tokenMatcher) matches(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(m[:], sum[:]) == 1
}

// securityHeaders sets the headers every response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// The page's URL holds the token: never send it on as a Referer.
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if isAPI(r) || r.URL.Path == "/" {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackOnly refuses a request whose Host is not a loopback name with the port the
// connection came in on. A browser sends the name it resolved: a page of evil.example
// that rebinds its name to 127.0.0.1 still says Host: evil.example.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r) {
			refuse(w, r, http.StatusForbidden, "the dashboard answers only at a loopback address "+
				"(localhost, 127.0.0.1, [::1]) with its own port: open the URL kubectl stepwise dashboard printed")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(r *http.Request) bool {
	// The port the connection was accepted on: the server needs no configuration for it,
	// and a request that did not come through a listener is refused.
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return false
	}
	_, port, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	host, hostPort, err := net.SplitHostPort(r.Host)
	if err != nil { // no port: the scheme's default
		host, hostPort = strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]"), "80"
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return hostPort == port
	}
	return false
}

// requireToken refuses an API request without the token: 401 when it has none, 403 when
// it has another. fromQuery also takes it from ?token= (for EventSource).
func (s *Server) requireToken(fromQuery bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(TokenHeader)
		if got == "" && fromQuery {
			got = r.URL.Query().Get("token")
		}
		switch {
		case got == "":
			writeError(w, http.StatusUnauthorized, "missing "+TokenHeader+" header: open the URL kubectl stepwise dashboard printed")
		case !s.token.matches(got):
			writeError(w, http.StatusForbidden, "wrong dashboard token: open the URL kubectl stepwise dashboard printed")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// sameOrigin refuses a mutation a browser says comes from another origin. The token
// header already keeps cross-site forms out; this also keeps out a page of another
// loopback port that learned the token.
func sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !strings.EqualFold(origin, "http://"+r.Host) {
			writeError(w, http.StatusForbidden, "cross-origin request refused (Origin "+origin+")")
			return
		}
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
		default:
			writeError(w, http.StatusForbidden, "cross-site request refused")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// refuse answers an API request with a JSON error and any other with text.
func refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if isAPI(r) {
		writeError(w, status, msg)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}
