package archive

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

const (
	// versionTable is goose's record of the applied migrations, named for the archive
	// so that it shares a database with other goose users.
	versionTable = "archive_schema_version"
	// migrationLock is the advisory lock migrations run under: "STPWARCH" in ASCII, apart
	// from goose's default one.
	migrationLock int64 = 0x5354505741524348
	// lockRetry and lockTries bound how long Open waits for another replica's migration:
	// goose polls the lock every lockRetry seconds (its minimum).
	lockRetry, lockTries = 1, 300
)

// migrate brings the schema to the newest migration. A replica that finds the lock
// held waits for it, then finds nothing left to apply.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	// A locker per call: goose's retry budget lives in the locker and is not reset.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLock),
		lock.WithLockTimeout(lockRetry, lockTries), lock.WithUnlockTimeout(lockRetry, 60))
	if err != nil {
		return fmt.Errorf("session locker: %w", err)
	}
	// Closing this *sql.DB leaves the pool open.
	db := stdlib.OpenDBFromPool(pool)
	defer func() { _ = db.Close() }()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker),
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return err
	}
	return nil
}
