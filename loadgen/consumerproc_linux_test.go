package loadgen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// children lists the processes whose parent is ppid, with their command
// lines.
func children(t *testing.T, ppid int) map[int][]byte {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]byte{}
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:]) // state, ppid, ...
		if len(f) < 2 || string(f[1]) != strconv.Itoa(ppid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline"))
		out[pid] = cmdline
	}
	return out
}

// TestConsumerProcessDiesWithTheLoadgen: a loadgen killed with SIGKILL in
// the middle of a run takes its consumer process (and its brokers) with it.
func TestConsumerProcessDiesWithTheLoadgen(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(strataBin, "loadgen", "--spawn", "1", "--spawn-segment-bytes", "4194304", "--partitions", "2",
		"--rate", "500", "--duration", "60s", "--consumers", "1", "--engine", "native")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()

	consumer, others := 0, []int{}
	for deadline := time.Now().Add(time.Minute); consumer == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no consumer process after a minute; stderr:\n%s", stderr.String())
		}
		select {
		case <-exited:
			t.Fatalf("loadgen exited early; stderr:\n%s", stderr.String())
		default:
		}
		others = others[:0]
		for pid, cmdline := range children(t, cmd.Process.Pid) {
			if bytes.Contains(cmdline, []byte("\x00"+ConsumerProcessArg)) {
				consumer = pid
			} else {
				others = append(others, pid)
			}
		}
	}
	if len(others) == 0 {
		t.Fatal("no broker process beside the consumer process")
	}
	t.Logf("killing loadgen %d: consumer process %d, brokers %v", cmd.Process.Pid, consumer, others)
	cmd.Process.Kill()
	<-exited
	for _, pid := range append([]int{consumer}, others...) {
		for deadline := time.Now().Add(30 * time.Second); !consumerProcGone(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("child %d still running 30 s after its loadgen was killed", pid)
			}
		}
	}
}
