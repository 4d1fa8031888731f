package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
)

// unreachable says why a call got no answer, in the plugin's words rather than the
// operating system's: "connection refused", "no route to host" and "i/o timeout" tell an
// open port from a closed or a filtered one, and a step's status is no port scanner. (The
// addresses the egress policy refuses are never dialled at all.) What a receiver's owner
// needs to fix, a certificate, is said as it is.
func unreachable(err error) string {
	var (
		dnsErr      *net.DNSError
		opErr       *net.OpError
		certErr     *tls.CertificateVerificationError
		authority   x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalid     x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		netErr      net.Error
		isTimeout   = errors.As(err, &netErr) && netErr.Timeout()
		isDialError = errors.As(err, &opErr) && opErr.Op == "dial"
	)
	switch {
	case errors.As(err, &dnsErr):
		return "the receiver's host name does not resolve"
	case isDialError:
		return "could not connect to the receiver (refused, unreachable or timed out)"
	case errors.As(err, &certErr), errors.As(err, &authority), errors.As(err, &hostname), errors.As(err, &invalid):
		return "the receiver's TLS certificate is not trusted (give its CA in key " + keyCA + " of the Secret): " + certErrorText(err)
	case errors.As(err, &recordErr):
		return "the receiver does not speak TLS (use an http URL, or https on a TLS port)"
	case isTimeout:
		return "the receiver did not answer in time"
	default:
		return "the connection to the receiver failed before an answer"
	}
}

// certErrorText is the x509 verdict of a certificate error (e.g. "x509: certificate
// signed by unknown authority"), without the wrapping of net/http that quotes the URL.
func certErrorText(err error) string {
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) && certErr.Err != nil {
		return certErr.Err.Error()
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		err = e
	}
	return err.Error()
}
