// Package pgtest runs a private, real PostgreSQL server (Debian's postgresql-NN
// binaries) for tests: its own cluster in a temp dir, trust authentication, on
// 127.0.0.1 at a free port, without fsync. When the tests run as root it runs the
// server as the "postgres" user, as postgres refuses to run as root.
package pgtest

import (
	"fmt"
	"testing"
)

// Start runs a server in t.TempDir() and stops it when the test ends. It fails the
// test when PostgreSQL is not installed or does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch(t.Context(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Registered after t.TempDir's removal, so it runs before it.
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("%v (log: %s)", err, s.LogPath)
		}
	})
	return s
}

// Stop shuts the server down (fast: open transactions roll back, clients are
// disconnected); Restart starts it again.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatalf("pgtest: %v (log: %s)", err, s.LogPath)
	}
}

// Restart stops the server and starts it again on the same port and data, as a
// database that restarts under its clients does.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	if err := s.start(t.Context()); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
}

// NewDatabase creates an empty database with a name of its own and returns its DSN,
// for a test that needs a schema of its own (migrations from scratch, exact counts).
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	dsn, err := s.CreateDatabase(t.Context(), fmt.Sprintf("test_%d", s.databases.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}
