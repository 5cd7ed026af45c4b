package e2e

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes a spawned broker receive SIGKILL when the test process
// dies (a test binary killed on its timeout would otherwise leave brokers
// running and holding ports and disk).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
