// Package stratatest holds helpers for tests: building the real strata
// binary, and the seed count of crash-consistency tests.
package stratatest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildBinary builds cmd/strata into a new temporary directory and returns
// the binary's path and a function that removes the directory. Build output
// goes to stderr.
func BuildBinary() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "strata-test-bin")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "strata")
	build := exec.Command("go", "build", "-o", path, "github.com/stratalog/strata/cmd/strata")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building strata: %w", err)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}
