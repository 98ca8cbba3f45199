package e2e

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/drainkit/drainkit/internal/mariadbtest"
)

// SnapshotStore starts a MariaDB for the room-services' snapshots when
// mariadbd is installed, in a directory under dir, and returns the
// environment that points them at it (MYSQL_DSN) and a function that stops
// it. Without mariadbd, or with SNAPSHOTS=redis, the snapshots stay in
// Redis. It says which on stdout.
func SnapshotStore(dir string) (env []string, stop func(), err error) {
	none := func() {}
	if os.Getenv("SNAPSHOTS") == "redis" {
		fmt.Println("snapshots: redis (SNAPSHOTS=redis)")
		return nil, none, nil
	}
	if !mariadbtest.Installed() {
		fmt.Println("snapshots: redis (mariadbd is not installed; with mariadb-server they go to MariaDB)")
		return nil, none, nil
	}
	db, err := mariadbtest.Launch(filepath.Join(dir, "mariadb"))
	if err != nil {
		return nil, none, err
	}
	fmt.Printf("snapshots: MariaDB (mariadbd at %s, data in a temporary directory); command log: redis\n", db.Addr)
	return []string{"MYSQL_DSN=" + db.DSN}, func() { _ = db.Close() }, nil
}
