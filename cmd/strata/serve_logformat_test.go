package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/stratatest"
)

// log.format: with json (the flag --log-format or the key in the
// properties file) every line strata serve writes to stderr, from the
// unknown-key warning before the broker starts to the shutdown line, is
// one JSON object with time, level and msg; with text (the default) the
// lines are slog's key=value text as before.
func TestServeLogFormat(t *testing.T) {
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)

	run := func(t *testing.T, props string, args ...string) []string {
		t.Helper()
		dir := t.TempDir()
		cfgFile := filepath.Join(dir, "server.properties")
		if err := os.WriteFile(cfgFile, []byte(props+"\nno.such.key=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"serve", "--config", cfgFile, "--listen", "127.0.0.1:0",
			"--data-dir", filepath.Join(dir, "data"), "--metrics-listeners", "http://127.0.0.1:0"}, args...)
		cmd := exec.Command(bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var got []string
		deadline := time.After(hangGuard)
		signalled := false
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					if err := cmd.Wait(); err != nil {
						t.Fatalf("strata serve: %v\n%s", err, strings.Join(got, "\n"))
					}
					if !signalled {
						t.Fatalf("strata serve exited before it listened:\n%s", strings.Join(got, "\n"))
					}
					return got
				}
				got = append(got, line)
				if !signalled && strings.Contains(line, "strata broker listening") {
					if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
					signalled = true
				}
			case <-deadline:
				t.Fatalf("strata serve did not listen and stop:\n%s", strings.Join(got, "\n"))
			}
		}
	}

	checkJSON := func(t *testing.T, lines []string) {
		t.Helper()
		msgs := map[string]map[string]any{}
		for _, line := range lines {
			var obj map[string]any
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Errorf("not a JSON line: %q: %v", line, err)
				continue
			}
			for _, k := range []string{"time", "level", "msg"} {
				if s, ok := obj[k].(string); !ok || s == "" {
					t.Errorf("line without %s: %q", k, line)
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, obj["time"].(string)); err != nil {
				t.Errorf("time of %q: %v", line, err)
			}
			msgs[obj["msg"].(string)] = obj
		}
		if w := msgs["ignoring unknown config key"]; w == nil || w["key"] != "no.such.key" || w["level"] != "WARN" {
			t.Errorf("unknown key warning: %v", w)
		}
		if l := msgs["strata broker listening"]; l == nil || !strings.HasPrefix(l["listen"].(string), "127.0.0.1:") {
			t.Errorf("listening line: %v", l)
		}
		if l := msgs["metrics endpoint listening"]; l == nil {
			t.Error("no metrics endpoint line")
		}
		if l := msgs["shutting down"]; l == nil || l["signal"] != "terminated" || l["level"] != "INFO" {
			t.Errorf("shutdown line: %v", l)
		}
	}

	t.Run("flag", func(t *testing.T) {
		checkJSON(t, run(t, "", "--log-format", "json"))
	})
	t.Run("key", func(t *testing.T) {
		checkJSON(t, run(t, "log.format=json"))
	})
	t.Run("text", func(t *testing.T) {
		lines := run(t, "")
		for _, line := range lines {
			if !strings.HasPrefix(line, "time=") {
				t.Errorf("not a text line: %q", line)
			}
		}
		for _, want := range []string{`level=WARN msg="ignoring unknown config key" key=no.such.key`,
			`level=INFO msg="strata broker listening"`, `level=INFO msg="shutting down" signal=terminated`} {
			found := false
			for _, line := range lines {
				found = found || strings.Contains(line, want)
			}
			if !found {
				t.Errorf("no line with %s in\n%s", want, strings.Join(lines, "\n"))
			}
		}
	})
	t.Run("bad", func(t *testing.T) {
		out, err := exec.Command(bin, "serve", "--log-format", "yaml", "--data-dir", t.TempDir()).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "log.format") {
			t.Errorf("--log-format yaml: %v: %s", err, out)
		}
	})
}
