//go:build !linux

package e2e

import "os/exec"

func dieWithTest(*exec.Cmd) {}
