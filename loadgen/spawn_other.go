//go:build !linux

package loadgen

import "os/exec"

func setParentDeathSignal(cmd *exec.Cmd) {}
