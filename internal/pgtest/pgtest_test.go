package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestServer walks one server through its life: the database exists, data survives a
// restart on the same port, a stopped server refuses connections.
func TestServer(t *testing.T) {
	s := Start(t)
	require.FileExists(t, s.LogPath)
	ctx := t.Context()

	conn := connect(t, s.DSN)
	var user, db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_user, current_database()").Scan(&user, &db))
	assert.Equal(t, User, user)
	assert.Equal(t, Database, db)
	var fsync string
	require.NoError(t, conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync))
	assert.Equal(t, "off", fsync)
	_, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before')")
	require.NoError(t, err)

	port := s.Port
	s.Restart(t)
	assert.Equal(t, port, s.Port)
	_, err = conn.Exec(ctx, "SELECT 1")
	assert.Error(t, err, "a connection does not survive a restart")

	var v string
	require.NoError(t, connect(t, s.DSN).QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	assert.Equal(t, "before", v)

	other := s.NewDatabase(t)
	require.NoError(t, connect(t, other).QueryRow(ctx, "SELECT current_database()").Scan(&db))
	assert.NotEqual(t, Database, db)

	s.Stop(t)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = pgx.Connect(short, s.DSN)
	assert.Error(t, err, "a stopped server refuses connections")
	s.Stop(t) // stopping twice is harmless
}

// TestLaunchReusesDir: Launch on a directory with a cluster keeps its data (a demo's
// database kept across runs).
func TestLaunchReusesDir(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s, err := Launch(ctx, Options{Dir: dir})
	require.NoError(t, err)
	_, err = connect(t, s.DSN).Exec(ctx, "CREATE TABLE kept (v int)")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Launch(ctx, Options{Dir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	var n int
	require.NoError(t, connect(t, s.DSN).QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n))
	assert.Zero(t, n)
}

// TestLongDir: a directory too long for a unix socket's path still works.
func TestLongDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a-directory-name-long-enough-to-push-the-socket-path-past-the-limit-of-sun-path")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	s, err := Launch(t.Context(), Options{Dir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	assert.NotContains(t, s.sockets, dir)
	assert.NoError(t, connect(t, s.DSN).Ping(t.Context()))
}

func TestBinDir(t *testing.T) {
	t.Setenv("PG_BINDIR", t.TempDir())
	_, err := binDir()
	assert.ErrorContains(t, err, "has no initdb and postgres")

	t.Setenv("PG_BINDIR", "")
	d, err := binDir()
	if err != nil {
		assert.ErrorIs(t, err, ErrNotFound)
		return
	}
	assert.True(t, hasServer(d))
}
