//go:build !linux

package loadgen

import (
	"errors"
	"os"
)

var errNoSmallFS = errors.New("--faults disk-full needs Linux")

func fsSpace(string) (int64, int64, error) { return 0, 0, errNoSmallFS }

func reserve(*os.File, int64) error { return errNoSmallFS }
