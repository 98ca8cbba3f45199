// Package sqlcheck is the readiness check of a database/sql database. It is
// a package of its own so that a service without a database does not link
// database/sql through readiness.
//
// # Tier
//
// [Ping] returns a gating [readiness.Check]: a replica's own database is the
// dependency whose loss must take it out of rotation. Its error text
// reaches the health body only through the registry, which strips the
// credentials a driver may put in it (a DSN's user:password@).
package sqlcheck
