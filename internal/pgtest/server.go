package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// User is the superuser initdb makes; Database is the database Launch creates.
	User     = "stepwise"
	Database = "stepwise"

	readyTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second
	pollEvery    = 20 * time.Millisecond
	// portTries bounds how often Launch picks another free port when another process
	// took the one it picked before postgres bound it.
	portTries = 3
	// maxSocketPath keeps the socket's path under the 107 bytes of sun_path, with room
	// for "/.s.PGSQL.NNNNN".
	maxSocketPath = 90
)

// Options configure Launch.
type Options struct {
	// Dir holds the server's files: data/ (made by initdb unless it holds a cluster
	// already), the socket and postgres.log. Required.
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
}

// Server is a private PostgreSQL server: one postmaster, trust authentication for User.
type Server struct {
	// DSN reaches Database over TCP.
	DSN string
	// Port is the TCP port on 127.0.0.1, the same across Restart.
	Port int
	// LogPath is the server's log (initdb's output too), for failure messages.
	LogPath string

	bin, data, sockets string
	ownSockets         bool // sockets is a directory of our own outside Dir, removed by Close
	cred               *syscall.Credential
	log                *os.File
	databases          atomic.Int64

	mu     sync.Mutex
	proc   *os.Process
	exited chan struct{} // closed once proc has been waited for
}

// Launch starts a server in opts.Dir and creates Database, for callers without a
// testing.TB: TestMain, or a demo. The caller stops it with Close.
func Launch(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.Dir == "" {
		return nil, errors.New("pgtest: launch: no directory")
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, fmt.Errorf("pgtest: launch: %w", err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgtest: launch: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgtest: launch: %w", err)
	}
	if err := handOver(dir, cred); err != nil {
		return nil, fmt.Errorf("pgtest: launch: %w", err)
	}
	s := &Server{bin: bin, data: filepath.Join(dir, "data"), cred: cred, LogPath: filepath.Join(dir, "postgres.log")}
	if s.log, err = os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, fmt.Errorf("pgtest: launch: %w", err)
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if err := s.sockDir(dir); err != nil {
		return nil, fmt.Errorf("pgtest: launch: socket directory: %w", err)
	}
	if err := s.initdb(ctx); err != nil {
		return nil, fmt.Errorf("pgtest: launch: %w", err)
	}
	for try := 1; ; try++ {
		s.Port = opts.Port
		if s.Port == 0 {
			if s.Port, err = freePort(); err != nil {
				return nil, fmt.Errorf("pgtest: launch: %w", err)
			}
		}
		err = s.start(ctx)
		if err == nil {
			break
		}
		if opts.Port != 0 || try == portTries || !strings.Contains(s.logTail(), "could not bind") {
			return nil, fmt.Errorf("pgtest: launch: %w", err)
		}
	}
	s.DSN = s.dsn(Database)
	if err := s.createDatabase(ctx, Database, true); err != nil {
		return nil, fmt.Errorf("pgtest: launch: %w", err)
	}
	return s, nil
}

// sockDir puts the unix socket in dir when its path is short enough, else in a short
// directory of its own under the temp root.
func (s *Server) sockDir(dir string) error {
	s.sockets = filepath.Join(dir, "sock")
	if len(s.sockets) > maxSocketPath {
		d, err := os.MkdirTemp("", "pgs")
		if err != nil {
			return err
		}
		s.sockets, s.ownSockets = d, true
		return handOver(d, s.cred)
	}
	if err := os.MkdirAll(s.sockets, 0o700); err != nil {
		return err
	}
	return handOver(s.sockets, s.cred)
}

// initdb makes the cluster unless data holds one (a demo's data kept across runs).
func (s *Server) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(s.data, "PG_VERSION")); err == nil {
		return nil
	}
	cmd := s.command(ctx, "initdb", "-D", s.data, "-U", User, "-A", "trust", "-E", "UTF8",
		"--no-locale", "--no-sync", "--no-instructions")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, s.logTail())
	}
	return nil
}

// command runs a server binary as the server's user, its output in the log.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = filepath.Dir(s.data)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// Pdeathsig: a test binary that dies (a panic, a timeout) takes its server along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

// start runs postgres on s.Port and waits until it takes connections.
func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("already running")
	}
	// Not CommandContext: ctx bounds starting, not the server's life.
	cmd := s.command(context.Background(), "postgres", "-D", s.data, "-p", strconv.Itoa(s.Port),
		"-k", s.sockets, "-c", "listen_addresses=127.0.0.1",
		// A test server needs no durability: off is several times faster.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.proc, s.exited = cmd.Process, exited
	if err := s.waitReady(ctx, exited); err != nil {
		_ = s.stopLocked()
		return err
	}
	return nil
}

// waitReady polls a connection until one succeeds, the server exits or the deadline.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := s.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited while starting:\n%s", s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready on port %d: %w\n%s", s.Port, err, s.logTail())
		case <-tick.C:
		}
	}
}

func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// stop shuts postgres down fast (SIGINT: roll back, disconnect, checkpoint), killing
// it when it takes longer than stopTimeout.
func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	if s.proc == nil {
		return nil
	}
	defer func() { s.proc, s.exited = nil, nil }()
	if err := s.proc.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop postgres (pid %d): %w", s.proc.Pid, err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = s.proc.Kill()
		<-s.exited
		return fmt.Errorf("postgres (pid %d) did not stop within %s: killed", s.proc.Pid, stopTimeout)
	}
}

// Close stops the server and releases what Launch made outside Dir; Dir itself is the
// caller's.
func (s *Server) Close() error {
	err := s.stop()
	if s.ownSockets {
		err = errors.Join(err, os.RemoveAll(s.sockets))
	}
	if s.log != nil {
		err = errors.Join(err, s.log.Close())
	}
	if err != nil {
		return fmt.Errorf("pgtest: close: %w", err)
	}
	return nil
}

// CreateDatabase creates a database (an empty one, from template1) and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := s.createDatabase(ctx, name, false); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return s.dsn(name), nil
}

// createDatabase creates name; when ifMissing, an existing one (a reused Dir) is kept.
func (s *Server) createDatabase(ctx context.Context, name string, ifMissing bool) error {
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if ifMissing {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			return fmt.Errorf("create database %s: %w", name, err)
		}
		if exists {
			return nil
		}
	}
	// CREATE DATABASE takes no parameters: the name is quoted as an identifier.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func (s *Server) dsn(database string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, s.Port, database)
}

// logTail is the end of the log, for error messages.
func (s *Server) logTail() string {
	const max = 4096
	f, err := os.Open(s.LogPath)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return fmt.Sprintf("--- %s ---\n%s", s.LogPath, b)
}

// freePort is a port on 127.0.0.1 free a moment ago; Launch tries another when postgres
// cannot bind it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
