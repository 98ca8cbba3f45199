package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/sqlcheck"
)

// sqlTarget is one database named by a go-sql-driver/mysql DSN
// (user:password@tcp(host:3306)/rooms).
type sqlTarget struct {
	env      string        // the variable that named it
	cfg      *mysql.Config // nil: not configured
	redacted string        // the DSN with the password replaced, for logs and errors
}

// sqlTargets are the service's databases: MYSQL_DSN keeps the room
// snapshots (gating: a replica that cannot reach it leaves rotation) and
// ANALYTICS_DSN is an optional database that is only reported
// (informational: its outage must never take every replica out).
type sqlTargets struct {
	Primary, Analytics sqlTarget
	// MaxOpen bounds each handle's pool (MYSQL_MAX_OPEN_CONNS, default
	// sqlMaxOpen).
	MaxOpen int
}

// Pool limits of each database handle. A readiness ping waits for a free
// connection under its own 300 ms budget, so a pool exhausted by slow
// queries shows as a timed-out check, never as a probe that hangs.
const (
	sqlMaxOpen     = 16
	sqlMaxIdle     = 4
	sqlMaxLifetime = 5 * time.Minute
	sqlStartBudget = 3 * time.Second
)

// sqlFromEnv reads MYSQL_DSN, ANALYTICS_DSN and MYSQL_MAX_OPEN_CONNS. A
// DSN that does not parse is refused naming the variable, the password
// redacted.
func sqlFromEnv(getenv func(string) string) (sqlTargets, error) {
	ts := sqlTargets{MaxOpen: sqlMaxOpen}
	if v := getenv("MYSQL_MAX_OPEN_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return sqlTargets{}, &configError{Field: "MYSQL_MAX_OPEN_CONNS", Value: v, Problem: "want a positive integer"}
		}
		ts.MaxOpen = n
	}
	for _, x := range []struct {
		env string
		t   *sqlTarget
	}{{"MYSQL_DSN", &ts.Primary}, {"ANALYTICS_DSN", &ts.Analytics}} {
		v := getenv(x.env)
		x.t.env = x.env
		if v == "" {
			continue
		}
		cfg, err := mysql.ParseDSN(v)
		if err != nil {
			return sqlTargets{}, &configError{Field: x.env, Value: redactDSN(v), Problem: "not a MySQL DSN (user:password@tcp(host:3306)/db)" + dsnProblem(v)}
		}
		if cfg.Timeout == 0 {
			cfg.Timeout = sqlStartBudget // dial timeout; the driver's default is the OS's
		}
		x.t.cfg = cfg
		r := cfg.Clone()
		if r.Passwd != "" {
			r.Passwd = "***"
		}
		x.t.redacted = r.FormatDSN()
	}
	return ts, nil
}

// dsnProblem is why the driver refuses v, as it says of v redacted: its
// errors quote what they could not read, which in a DSN split at a '/' in
// the password ("app:hunter2/x@tcp(db:3306)" is network "app:hunter2") is
// part of the password.
func dsnProblem(v string) string {
	if _, err := mysql.ParseDSN(redactDSN(v)); err != nil {
		return ": " + err.Error()
	}
	return ""
}

// redactDSN hides what may be a password in a DSN that did not parse:
// everything between the first ':' and the last '@'.
func redactDSN(v string) string {
	at, colon := strings.LastIndexByte(v, '@'), strings.IndexByte(v, ':')
	if at < 0 || colon < 0 || colon > at {
		return v
	}
	return v[:colon+1] + "***" + v[at:]
}

// sqlLog sends the MySQL driver's log lines (dropped or bad connections,
// which it retries or returns as errors) to the service's JSON log.
type sqlLog struct{ log *slog.Logger }

func (l sqlLog) Print(v ...any) { l.log.Warn(fmt.Sprint(v...), "component", "go-sql-driver") }

// sqlDBs are the open database handles; nil where not configured.
type sqlDBs struct {
	primary, analytics *sql.DB
	snapshots          *room.SQLSnapshots
}

// sqlOptions wires the databases: handles closed after the drain, the
// schema migrated at start, the snapshot store, and the readiness checks.
func sqlOptions(c config) fx.Option {
	opts := []fx.Option{fx.Provide(newSQL, func(d *sqlDBs) *room.SQLSnapshots { return d.snapshots })}
	if c.SQL.Primary.cfg != nil {
		opts = append(opts, fx.Provide(fxmodule.AsCheck(func(d *sqlDBs) readiness.Check {
			ch := sqlcheck.Ping(d.primary)
			ch.Name = "mysql"
			return ch
		})))
	}
	if c.SQL.Analytics.cfg != nil {
		opts = append(opts, fx.Provide(fxmodule.AsCheck(func(d *sqlDBs) readiness.Check {
			ch := sqlcheck.Ping(d.analytics)
			ch.Name, ch.Tier = "analytics", readiness.Informational
			return ch
		})))
	}
	return fx.Options(opts...)
}

// newSQL opens the configured databases. At start, the snapshot database
// must answer and its schema is created or checked (a newer schema is
// refused); the analytics database is not waited for, since it may be
// down without the service being unable to serve. fx closes both after the
// drain.
func newSQL(lc fx.Lifecycle, c config, m *lifecycle.Manager, log *slog.Logger) (*sqlDBs, error) {
	log = log.With("service", m.Config().Service, "node_id", m.Config().NodeID)
	d := &sqlDBs{}
	open := func(t sqlTarget) (*sql.DB, error) {
		cfg := t.cfg.Clone()
		cfg.Logger = sqlLog{log}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", t.env, t.redacted, err)
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(c.SQL.MaxOpen)
		db.SetMaxIdleConns(min(sqlMaxIdle, c.SQL.MaxOpen))
		db.SetConnMaxLifetime(sqlMaxLifetime)
		return db, nil
	}
	var err error
	if t := c.SQL.Primary; t.cfg != nil {
		if d.primary, err = open(t); err != nil {
			return nil, err
		}
		if d.snapshots, err = room.NewSQLSnapshots(d.primary); err != nil {
			return nil, err
		}
		log.Info("room snapshots in mysql", "from", t.env, "dsn", t.redacted)
	} else {
		log.Info("room snapshots in redis (no MYSQL_DSN)")
	}
	if t := c.SQL.Analytics; t.cfg != nil {
		if d.analytics, err = open(t); err != nil {
			return nil, errors.Join(err, d.close())
		}
		log.Info("analytics database (informational)", "from", t.env, "dsn", t.redacted)
	}
	lc.Append(fx.Hook{
		OnStart: fxmodule.Abortable(m, func(ctx context.Context) error {
			if d.primary == nil {
				return nil
			}
			ctx, cancel := context.WithTimeout(ctx, sqlStartBudget)
			defer cancel()
			t := c.SQL.Primary
			if err := d.primary.PingContext(ctx); err != nil {
				return fmt.Errorf("%s=%s: ping failed: %w", t.env, t.redacted, err)
			}
			if err := d.snapshots.Migrate(ctx); err != nil {
				return fmt.Errorf("%s=%s: %w", t.env, t.redacted, err)
			}
			return nil
		}),
		OnStop: func(context.Context) error { return d.close() },
	})
	return d, nil
}

func (d *sqlDBs) close() error {
	var errs []error
	for _, db := range []*sql.DB{d.primary, d.analytics} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}
