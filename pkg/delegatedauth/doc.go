// Package delegatedauth serves an endpoint (the operator's /metrics and profiles) only to
// callers the API server vouches for, as kube-controller-manager and kube-rbac-proxy do: a
// bearer token checked by a TokenReview, then a SubjectAccessReview for the verb and the
// path (nonResourceURLs), both answers cached for a while. It also makes the TLS setup such
// an endpoint needs, since a bearer token must not cross the network in clear text.
package delegatedauth
