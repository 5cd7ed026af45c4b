package main

// Tests of packaging/container/build-image, the scratch image built with
// buildah (packaging/container/README.md). The script runs for real with a
// stand-in buildah on PATH that records each call, so what it asks buildah
// for is checked without a container engine; the image it describes must
// agree with the Dockerfile's, the systemd unit's and the sample config's
// paths, user, volume and ports.

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBuildah is a buildah that appends its arguments to $BUILDAH_LOG
// (each followed by a unit separator, a call ended by a record separator)
// and answers `from` with a container name.
const fakeBuildah = `#!/usr/bin/env bash
{ printf '%s\x1f' "$@"; printf '\x1e'; } >>"$BUILDAH_LOG"
if [ "$1" = from ]; then echo strata-working-container; fi
`

// runBuildImage runs packaging/container/build-image with args and the
// stand-in buildah; it returns the calls and the script's output.
func runBuildImage(t *testing.T, args ...string) (calls [][]string, out string, err error) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "buildah"), []byte(fakeBuildah), 0o755); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "calls")
	cmd := exec.Command(filepath.Join(repoRoot, "packaging/container/build-image"), args...)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BUILDAH_LOG="+logFile)
	b, err := cmd.CombinedOutput()
	data, _ := os.ReadFile(logFile)
	for call := range strings.SplitSeq(strings.TrimSuffix(string(data), "\x1e"), "\x1e") {
		if call != "" {
			calls = append(calls, strings.Split(strings.TrimSuffix(call, "\x1f"), "\x1f"))
		}
	}
	return calls, string(b), err
}

// fakeRelease is scripts/release's layout for one version and arch.
func fakeRelease(t *testing.T, version, arch string) string {
	t.Helper()
	out := t.TempDir()
	dir := filepath.Join(out, "strata-"+version+"-linux-"+arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "strata"), []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.properties"), []byte(readRepoFile(t, "packaging/server.properties")), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// flagValues are the values of every occurrence of flag in args.
func flagValues(args []string, flag string) []string {
	var v []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			v = append(v, args[i+1])
		}
	}
	return v
}

// The scratch image: build-image takes the release binary and sample config
// out of scripts/release's layout, installs them where the Dockerfile and
// the unit do, adds the non-root user 10001 (passwd, group) and the data
// volume owned by it, sets the entry point, command, user, working
// directory, volume and ports the sample config and the Dockerfile give,
// commits it as strata:VERSION and writes the OCI archive asked for; a
// missing release is refused before buildah is called.
func TestContainerBuildImage(t *testing.T) {
	const version = "v9.9.9-test"
	rel := fakeRelease(t, version, "amd64")
	archive := filepath.Join(t.TempDir(), "img.tar")
	calls, out, err := runBuildImage(t, "--release", rel, "--oci-archive", archive)
	if err != nil {
		t.Fatalf("build-image: %v\n%s", err, out)
	}
	if len(calls) == 0 || !slices.Equal(calls[0], []string{"from", "--arch", "amd64", "scratch"}) {
		t.Fatalf("first call %q, want from --arch amd64 scratch", calls)
	}
	const ctr = "strata-working-container"
	copies := map[string][]string{} // destination → the copy call
	var config, commit, push []string
	for _, c := range calls[1:] {
		switch c[0] {
		case "copy":
			if !slices.Contains(c, ctr) {
				t.Errorf("copy into another container: %q", c)
			}
			copies[c[len(c)-1]] = c
		case "config":
			config = c
		case "commit":
			commit = c
		case "push":
			push = c
		case "rm":
		default:
			t.Errorf("unexpected buildah call %q", c)
		}
	}
	relDir := filepath.Join(rel, "strata-"+version+"-linux-amd64")
	for dest, want := range map[string]struct{ src, mode, owner string }{
		installedBinary:   {filepath.Join(relDir, "strata"), "0755", ""},
		installedConfig:   {filepath.Join(relDir, "server.properties"), "0644", ""},
		"/etc/passwd":     {"", "0644", ""},
		"/etc/group":      {"", "0644", ""},
		"/var/lib/strata": {"", "0750", "10001:10001"},
	} {
		c := copies[dest]
		if c == nil {
			t.Errorf("nothing copied to %s", dest)
			continue
		}
		if want.src != "" && c[len(c)-2] != want.src {
			t.Errorf("%s copied from %s, want %s", dest, c[len(c)-2], want.src)
		}
		if got := flagValues(c, "--chmod"); !slices.Equal(got, []string{want.mode}) {
			t.Errorf("%s: --chmod %q, want %s", dest, got, want.mode)
		}
		if got := flagValues(c, "--chown"); want.owner != "" && !slices.Equal(got, []string{want.owner}) {
			t.Errorf("%s: --chown %q, want %s", dest, got, want.owner)
		}
	}

	cfg, _ := sampleConfig(t, false)
	_, kafkaPort, _ := net.SplitHostPort(cfg.Listen)
	_, metricsPort, _ := net.SplitHostPort(cfg.MetricsListeners[0])
	var dockerEntry, dockerCmd []string
	for _, in := range parseDockerfile(t) {
		switch in.op {
		case "ENTRYPOINT":
			dockerEntry = append(dockerEntry, in.args)
		case "CMD":
			dockerCmd = append(dockerCmd, in.args)
		}
	}
	for flag, want := range map[string][]string{
		"--user":       {"10001:10001"},
		"--workingdir": {cfg.DataDir},
		"--volume":     {cfg.DataDir},
		"--port":       {kafkaPort + "/tcp", metricsPort + "/tcp"},
		"--entrypoint": dockerEntry,
		"--cmd":        dockerCmd,
		"--arch":       {"amd64"},
	} {
		if got := flagValues(config, flag); !slices.Equal(got, want) {
			t.Errorf("config %s %q, want %q (the Dockerfile's and the sample config's)", flag, got, want)
		}
	}
	if config[len(config)-1] != ctr {
		t.Errorf("config of %q", config[len(config)-1])
	}
	if len(commit) < 2 || commit[len(commit)-1] != "strata:"+version || commit[len(commit)-2] != ctr {
		t.Errorf("commit %q, want the container as strata:%s", commit, version)
	}
	if want := "oci-archive:" + archive + ":strata:" + version; len(push) < 2 || push[len(push)-1] != want {
		t.Errorf("push %q, want %s", push, want)
	}

	// No release for the arch: refused, buildah never called.
	calls, out, err = runBuildImage(t, "--release", rel, "--arch", "arm64")
	if err == nil || len(calls) != 0 || !strings.Contains(out, "run scripts/release --arch arm64 first") {
		t.Errorf("without an arm64 release: err %v, %d buildah calls, output %q", err, len(calls), out)
	}
}
