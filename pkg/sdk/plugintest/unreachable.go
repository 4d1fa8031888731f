package plugintest

import (
	"net/url"
	"strings"
)

// unreachableHost is an address where nothing listens: a connection is refused at once.
const unreachableHost = "127.0.0.1:1"

// unreachableURL is v, when it is an http(s) URL, with its host made unreachableHost, its
// user info, path and query kept: what an error about it may quote.
func unreachableURL(v string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return v, false
	}
	u.Host = unreachableHost
	return u.String(), true
}

// unreachableParams is params with every URL made unreachable, and whether there was one.
func unreachableParams(params map[string]string) (map[string]string, bool) {
	out := make(map[string]string, len(params))
	changed := false
	for k, v := range params {
		u, ok := unreachableURL(v)
		out[k], changed = u, changed || ok
	}
	return out, changed
}

// unreachableData is Secret data with every URL made unreachable, and whether there was one.
func unreachableData(data map[string][]byte) (map[string][]byte, bool) {
	if data == nil {
		return nil, false
	}
	out := make(map[string][]byte, len(data))
	changed := false
	for k, v := range data {
		u, ok := unreachableURL(string(v))
		out[k] = v
		if ok {
			out[k], changed = []byte(u), true
		}
	}
	return out, changed
}
