// Command tempfile leaves a file in its temporary directory, as a program
// under test may: proctest must not let it outlive the test.
package main

import (
	"fmt"
	"os"
)

func main() {
	f, err := os.CreateTemp("", "left-behind")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	f.Close()
	fmt.Println("wrote", f.Name())
}
