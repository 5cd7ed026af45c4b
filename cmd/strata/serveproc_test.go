package main

import (
	"bufio"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// serveProc is a `strata serve` process a test started (startServe): its
// log lines (stderr, buffered; lines past the buffer are dropped), its
// exit, and the listen addresses it logged.
type serveProc struct {
	cmd     *exec.Cmd
	logs    chan string // every line, in order, until the process exits
	exited  chan error  // Wait's result, after the last line was sent to logs
	kafka   string      // the first Kafka listener's host:port
	metrics string      // the metrics endpoint's host:port ("" without --metrics-listeners)
}

var (
	serveMetricsRe = regexp.MustCompile(`msg="metrics endpoint listening" listen=(\S+)`)
	serveKafkaRe   = regexp.MustCompile(`msg="strata broker listening".* listen=(\S+)`)
)

// startServe runs `bin serve args...` and waits (at most hangGuard, a hang
// detector, not a performance threshold) until it has logged its Kafka
// listener and, when withMetrics, its metrics endpoint. The process is
// killed at cleanup if still running.
func startServe(t *testing.T, bin string, hangGuard time.Duration, withMetrics bool, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{cmd: exec.Command(bin, append([]string{"serve"}, args...)...),
		logs: make(chan string, 1024), exited: make(chan error, 1)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case p.logs <- sc.Text():
			default: // nobody reads any more
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() { p.cmd.Process.Kill() }) // after a failure; a no-op once it exited
	deadline := time.After(hangGuard)
	for p.kafka == "" || (withMetrics && p.metrics == "") {
		select {
		case line := <-p.logs:
			if m := serveMetricsRe.FindStringSubmatch(line); m != nil {
				p.metrics = m[1]
			}
			if m := serveKafkaRe.FindStringSubmatch(line); m != nil && p.kafka == "" {
				p.kafka = m[1]
			}
		case err := <-p.exited:
			t.Fatalf("strata serve exited: %v", err)
		case <-deadline:
			t.Fatal("strata serve did not log its listeners")
		}
	}
	return p
}

// stop sends SIGTERM and waits (at most hangGuard) for a clean exit.
func (p *serveProc) stop(t *testing.T, hangGuard time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("strata serve after SIGTERM: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("strata serve did not stop after SIGTERM")
	}
}
