package main

// Tests of the release build and the packaging: scripts/release,
// packaging/server.properties, packaging/systemd, Dockerfile. They read the
// repository's files (two directories up) and nothing outside it but a
// temporary directory.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/config"
)

const repoRoot = "../.."

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sampleConfig is packaging/server.properties through the broker's own
// parser, as `strata serve --config` reads it. With commented set, the
// commented-out `#key=value` lines (the cluster section) are read too.
func sampleConfig(t *testing.T, commented bool) (config.Broker, map[string]string) {
	t.Helper()
	text := readRepoFile(t, "packaging/server.properties")
	if commented {
		var b strings.Builder
		for line := range strings.Lines(text) {
			if rest, ok := strings.CutPrefix(line, "#"); ok && len(rest) > 0 && rest[0] >= 'a' && rest[0] <= 'z' && strings.Contains(rest, "=") {
				line = rest
			}
			b.WriteString(line)
		}
		text = b.String()
	}
	props, err := config.ParseProperties(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	if err := cfg.Apply(props); err != nil {
		t.Fatalf("packaging/server.properties: %v", err)
	}
	if len(cfg.Unknown) > 0 {
		t.Fatalf("packaging/server.properties: keys the broker does not know (renamed?): %q", cfg.Unknown)
	}
	if err := cfg.Finish(); err != nil {
		t.Fatalf("packaging/server.properties: %v", err)
	}
	return cfg, props
}

// The sample properties use the broker's key names (a renamed or misspelt
// key fails here, commented-out ones included) with values it accepts, and
// put the data where the unit and the image expect it.
func TestSamplePropertiesParse(t *testing.T) {
	cfg, props := sampleConfig(t, false)
	if cfg.DataDir != "/var/lib/strata" {
		t.Errorf("log.dirs: %q, want /var/lib/strata (the unit's StateDirectory, the image's volume)", cfg.DataDir)
	}
	if _, port, _ := net.SplitHostPort(cfg.Listen); port != "9092" {
		t.Errorf("listen %q: want port 9092", cfg.Listen)
	}
	if len(cfg.MetricsListeners) != 1 {
		t.Errorf("metrics.listeners: %q, want one listener (the image's HEALTHCHECK)", cfg.MetricsListeners)
	}
	for k := range props {
		if _, ok := cfg.Static[k]; !ok {
			t.Errorf("key %s parsed but not recorded as set", k)
		}
	}
	cluster, cprops := sampleConfig(t, true)
	if len(cprops) <= len(props) {
		t.Fatalf("no commented-out keys found: %d keys vs %d", len(cprops), len(props))
	}
	if voters := strings.Split(cluster.ControllerQuorum, ","); len(voters) != 3 {
		t.Errorf("commented cluster section: controller.quorum.voters %q, want 3 voters", cluster.ControllerQuorum)
	}
}

// unitFile is a systemd unit: section → key → values (in order).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, text string) unitFile {
	t.Helper()
	u := unitFile{}
	sec := ""
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			sec = line[1 : len(line)-1]
			u[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("unit line %d: %q", n+1, line)
			}
			u[sec][strings.TrimSpace(k)] = append(u[sec][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

func (u unitFile) one(t *testing.T, sec, key string) string {
	t.Helper()
	v := u[sec][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s: %q, want one value", sec, key, v)
	}
	return v[0]
}

const (
	installedBinary = "/usr/local/bin/strata"
	installedConfig = "/etc/strata/server.properties"
)

// The systemd unit runs the installed binary on the installed config as a
// dedicated user, with the limits the broker needs and a stop timeout that
// covers a clean shutdown; systemd-analyze verify finds nothing to say.
func TestSystemdUnit(t *testing.T) {
	text := readRepoFile(t, "packaging/systemd/strata.service")
	u := parseUnit(t, text)
	if got, want := u.one(t, "Service", "ExecStart"), installedBinary+" serve --config "+installedConfig; got != want {
		t.Errorf("ExecStart=%s, want %s", got, want)
	}
	user := u.one(t, "Service", "User")
	if user == "" || user == "root" || user == "0" {
		t.Errorf("User=%s: want a dedicated user", user)
	}
	var sysusers []string // the u lines' names
	for line := range strings.Lines(readRepoFile(t, "packaging/systemd/strata.sysusers")) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "u" {
			sysusers = append(sysusers, f[1])
		}
	}
	if !slices.Equal(sysusers, []string{user}) {
		t.Errorf("strata.sysusers creates %q, the unit runs as %q", sysusers, user)
	}
	nofile := u.one(t, "Service", "LimitNOFILE")
	if n, err := strconv.ParseUint(nofile, 10, 64); nofile != "infinity" && (err != nil || n < 65536) {
		t.Errorf("LimitNOFILE=%s: want at least 65536 (a descriptor per partition and per connection)", nofile)
	}
	if got := u.one(t, "Service", "LimitMEMLOCK"); got != "infinity" {
		t.Errorf("LimitMEMLOCK=%s: want infinity (io_uring's registered buffers grow with partitions)", got)
	}
	if got := u.one(t, "Service", "Restart"); got != "on-failure" {
		t.Errorf("Restart=%s", got)
	}
	if got := u.one(t, "Service", "KillSignal"); got != "SIGTERM" {
		t.Errorf("KillSignal=%s: strata serve shuts down cleanly on SIGTERM", got)
	}
	stop, err := strconv.Atoi(u.one(t, "Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v (want whole seconds)", err)
	}
	if time.Duration(stop)*time.Second < controlledShutdownTimeout+60*time.Second {
		t.Errorf("TimeoutStopSec=%d: less than the controlled shutdown (%v) and a minute to flush", stop, controlledShutdownTimeout)
	}
	cfg, _ := sampleConfig(t, false)
	if got := "/var/lib/" + u.one(t, "Service", "StateDirectory"); got != cfg.DataDir {
		t.Errorf("StateDirectory gives %s, server.properties' log.dirs is %s", got, cfg.DataDir)
	}
	if got := "/etc/" + u.one(t, "Service", "ConfigurationDirectory"); got != path.Dir(installedConfig) {
		t.Errorf("ConfigurationDirectory gives %s, want %s", got, path.Dir(installedConfig))
	}
	if u.one(t, "Install", "WantedBy") != "multi-user.target" {
		t.Errorf("WantedBy: %q", u["Install"]["WantedBy"])
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze is not installed: the unit was checked by the assertions above only")
		return
	}
	// verify wants ExecStart's binary to exist: point it at one here.
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "strata.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(text, installedBinary, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// dockerInstr is one Dockerfile instruction, continuation lines joined.
type dockerInstr struct {
	op, args string
}

func parseDockerfile(t *testing.T) []dockerInstr {
	t.Helper()
	var out []dockerInstr
	var cur strings.Builder
	for line := range strings.Lines(readRepoFile(t, "Dockerfile")) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		op, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(op), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

// dockerReleaseCopy is the builder's copy of the release binary out of
// scripts/release's layout: its source (with $STRATA_VERSION and
// $TARGETARCH) and its destination.
func dockerReleaseCopy(t *testing.T, ins []dockerInstr) (src, dst string) {
	t.Helper()
	for _, in := range ins {
		if in.op != "RUN" || !strings.Contains(in.args, "scripts/release --out /dist") {
			continue
		}
		_, cp, ok := strings.Cut(in.args, "&& cp ")
		f := strings.Fields(cp)
		if !ok || len(f) != 2 {
			t.Fatalf("the release RUN does not end in cp SRC DST: %q", in.args)
		}
		return strings.Trim(f[0], `"`), f[1]
	}
	t.Fatal("no RUN scripts/release --out /dist in the Dockerfile")
	return "", ""
}

// The Dockerfile (it cannot be built here: no Docker engine) copies files
// that exist and are not excluded from the context, builds with
// scripts/release, runs the binary where the unit and the docs put it on
// the sample config, as a non-root user, with the data volume, the ports
// and the health check the config gives.
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t)
	var ignore []string
	for line := range strings.Lines(readRepoFile(t, ".dockerignore")) {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			ignore = append(ignore, strings.Trim(line, "/"))
		}
	}
	ignored := func(p string) bool {
		for _, pat := range ignore {
			if ok, _ := path.Match(pat, p); ok || strings.HasPrefix(p, pat+"/") {
				return true
			}
		}
		return false
	}
	goMod := readRepoFile(t, "go.mod")
	var froms []string
	by := map[string][]string{} // op → args, in order
	for _, in := range ins {
		by[in.op] = append(by[in.op], in.args)
		if in.op == "FROM" {
			froms = append(froms, in.args)
		}
	}
	builder := strings.TrimPrefix(froms[0], "--platform=$BUILDPLATFORM ")
	if len(froms) != 2 || !strings.HasPrefix(builder, "golang:") || !strings.HasSuffix(builder, " AS build") {
		t.Fatalf("FROM: %q, want a golang builder AS build and a runtime stage", froms)
	}
	goImage := strings.TrimSuffix(strings.TrimPrefix(builder, "golang:"), " AS build")
	if !strings.Contains(goMod, "\ngo "+goImage+".") && !strings.Contains(goMod, "\ngo "+goImage+"\n") {
		t.Errorf("builder golang:%s is not go.mod's Go version", goImage)
	}
	src, dst := dockerReleaseCopy(t, ins)
	if !strings.HasPrefix(src, "/dist/strata-$STRATA_VERSION-linux-$TARGETARCH/") {
		t.Errorf("the builder copies %s, not out of scripts/release's layout (TestReleaseScript checks the file is there)", src)
	}
	installed := ""
	configCopied := ""
	for _, args := range by["COPY"] {
		f := strings.Fields(args)
		if from, ok := strings.CutPrefix(f[0], "--from="); ok {
			if from != "build" || len(f) != 3 || f[1] != dst {
				t.Errorf("COPY %s: want COPY --from=build %s DEST", args, dst)
			}
			installed = f[2]
			continue
		}
		for _, s := range f[:len(f)-1] {
			if _, err := os.Stat(filepath.Join(repoRoot, s)); err != nil {
				t.Errorf("COPY %s: %v", args, err)
			}
			if s != "." && ignored(path.Clean(s)) {
				t.Errorf("COPY %s: .dockerignore leaves it out", args)
			}
		}
		if f[0] == "packaging/server.properties" {
			configCopied = f[len(f)-1]
		}
	}
	for _, need := range []string{"go.mod", "go.sum", "cmd/strata/main.go", "scripts/release", "packaging/server.properties", "packaging/systemd/strata.service", "README.md", "docs/install.md"} {
		if ignored(need) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", need)
		}
	}
	if installed != installedBinary {
		t.Errorf("the image installs the binary at %q, the unit and docs at %s", installed, installedBinary)
	}
	if got, want := by["ENTRYPOINT"], []string{`["` + installedBinary + `"]`}; !slices.Equal(got, want) {
		t.Errorf("ENTRYPOINT %q, want %q", got, want)
	}
	if configCopied != installedConfig {
		t.Errorf("server.properties copied to %q, want %s", configCopied, installedConfig)
	}
	if got, want := by["CMD"], []string{`["serve", "--config", "` + installedConfig + `"]`}; !slices.Equal(got, want) {
		t.Errorf("CMD %q, want %q", got, want)
	}
	cfg, _ := sampleConfig(t, false)
	if got := by["VOLUME"]; !slices.Equal(got, []string{cfg.DataDir}) {
		t.Errorf("VOLUME %q, want log.dirs %s", got, cfg.DataDir)
	}
	users := by["USER"]
	if len(users) != 1 || strings.HasPrefix(users[0], "root") || strings.HasPrefix(users[0], "0") {
		t.Errorf("USER %q: want one non-root user", users)
	}
	_, kafkaPort, _ := net.SplitHostPort(cfg.Listen)
	_, metricsPort, err := net.SplitHostPort(cfg.MetricsListeners[0])
	if err != nil {
		t.Fatalf("metrics listener %q: %v", cfg.MetricsListeners[0], err)
	}
	if got := by["EXPOSE"]; !slices.Equal(got, []string{kafkaPort + " " + metricsPort}) {
		t.Errorf("EXPOSE %q, want %s %s (listeners, metrics.listeners)", got, kafkaPort, metricsPort)
	}
	hc := by["HEALTHCHECK"]
	if len(hc) != 1 {
		t.Fatalf("HEALTHCHECK %q", hc)
	}
	var probe string
	for _, w := range strings.Fields(hc[0]) {
		if strings.HasPrefix(w, "http://") {
			probe = w
		}
	}
	pu, err := url.Parse(probe)
	if err != nil || pu.Port() != metricsPort || pu.Path != "/healthz" {
		t.Errorf("HEALTHCHECK probes %q, want /healthz on the metrics port %s", probe, metricsPort)
	}
}

// The release build: scripts/release prints git's version, commit and
// commit date, and builds (amd64 here, to stay fast) a static binary that
// prints its stamp, a tarball with the binary, config, unit and docs, and
// SHA256SUMS that match; the Dockerfile's copy finds the binary where the
// layout puts it.
func TestReleaseScript(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(repoRoot, "scripts/release"))
	if err != nil {
		t.Fatal(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "STRATA_") })

	// The version from git. Other people commit in this tree: retry when
	// HEAD or the dirty mark moved while the script ran.
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %q: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	for try := 0; ; try++ {
		before := git("describe", "--tags", "--always", "--dirty") + " " + git("rev-parse", "HEAD")
		cmd := exec.Command(script, "--print-version")
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("scripts/release --print-version: %v", err)
		}
		after := git("describe", "--tags", "--always", "--dirty") + " " + git("rev-parse", "HEAD")
		if before != after && try < 3 {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		secs, _ := strconv.ParseInt(git("log", "-1", "--format=%ct", "HEAD"), 10, 64)
		want := []string{strings.Fields(after)[0], strings.Fields(after)[1], time.Unix(secs, 0).UTC().Format(time.RFC3339)}
		if !slices.Equal(lines, want) {
			t.Errorf("--print-version: %q, want %q", lines, want)
		}
		break
	}

	arch := "amd64"
	const version, commit, date = "v0.0.0-releasetest", "fedcba9876543210fedcba9876543210fedcba98", "2026-01-02T03:04:05Z"
	out := t.TempDir()
	cmd := exec.Command(script, "--out", out, "--arch", arch)
	cmd.Env = append(env, "STRATA_VERSION="+version, "STRATA_COMMIT="+commit, "STRATA_DATE="+date)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	name := "strata-" + version + "-linux-" + arch
	binPath := filepath.Join(out, name, "strata")
	bin, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}

	// SHA256SUMS: the binary and the tarball, as sha256sum -c reads it.
	sums := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, filepath.Join(out, "SHA256SUMS"))))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		sums[file] = sum
	}
	wantFiles := []string{name + "/strata", name + ".tar.gz"}
	if len(sums) != len(wantFiles) {
		t.Errorf("SHA256SUMS names %d files, want %q", len(sums), wantFiles)
	}
	for _, f := range wantFiles {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		if got := hex.EncodeToString(h[:]); sums[f] != got {
			t.Errorf("SHA256SUMS says %s of %s, it is %s", sums[f], f, got)
		}
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		c := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
		c.Dir = out
		if b, err := c.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check: %v\n%s", err, b)
		}
	}

	// A static linux/amd64 executable.
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	if ef.Machine != elf.EM_X86_64 {
		t.Errorf("machine %v, want x86-64", ef.Machine)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%v)", p.Type)
		}
	}
	if ef.Machine == elf.EM_X86_64 && runtime.GOARCH == "amd64" {
		got, err := exec.Command(binPath, "version").CombinedOutput()
		wantLine := fmt.Sprintf("strata %s, revision %s (%s), go", version, commit, date)
		if err != nil || !strings.HasPrefix(string(got), wantLine) || !strings.HasSuffix(string(got), " linux/amd64\n") {
			t.Errorf("strata version: %v %q, want %q...", err, got, wantLine)
		}
	}

	// The tarball: the directory, the binary, the config, the unit, the
	// docs, owned by root, dated at the commit.
	tf, err := os.Open(filepath.Join(out, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	zr, err := gzip.NewReader(tf)
	if err != nil {
		t.Fatal(err)
	}
	wantTar := map[string]string{ // entry → repository file ("" for the binary)
		name + "/strata":            "",
		name + "/server.properties": "packaging/server.properties",
		name + "/strata.service":    "packaging/systemd/strata.service",
		name + "/strata.sysusers":   "packaging/systemd/strata.sysusers",
		name + "/README.md":         "README.md",
	}
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || !slices.Contains(docs, filepath.Join(repoRoot, "docs", "install.md")) {
		t.Fatalf("docs/*.md: %q %v", docs, err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(repoRoot, d)
		wantTar[name+"/"+filepath.ToSlash(rel)] = filepath.ToSlash(rel)
	}
	commitTime, _ := time.Parse(time.RFC3339, date)
	seen := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(commitTime) {
			t.Errorf("%s: uid %d gid %d time %v, want root's at %v", h.Name, h.Uid, h.Gid, h.ModTime, commitTime)
		}
		if h.Typeflag == tar.TypeDir {
			if d := strings.TrimSuffix(h.Name, "/"); d != name && d != name+"/docs" {
				t.Errorf("unexpected directory %s", h.Name)
			}
			continue
		}
		src, ok := wantTar[h.Name]
		if !ok {
			t.Errorf("unexpected entry %s", h.Name)
			continue
		}
		seen[h.Name] = true
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		// The entry is the staged file; the staged files are the
		// repository's (the packaging's and install.md compared whole;
		// others edit README.md and the other guides while this runs).
		want, mode := bin, int64(0o755)
		if src != "" {
			want, mode = []byte(readFile(t, filepath.Join(out, h.Name))), 0o644
			whole := strings.HasPrefix(src, "packaging/") || src == "docs/install.md"
			if repo := readRepoFile(t, src); whole && repo != string(want) || len(want) == 0 {
				t.Errorf("%s: %d bytes, %s has %d", h.Name, len(want), src, len(repo))
			}
		}
		if !bytes.Equal(body, want) || h.Mode&0o777 != mode {
			t.Errorf("%s: %d bytes mode %o, want %s's %d bytes mode %o", h.Name, len(body), h.Mode&0o777, cmp.Or(src, "the binary"), len(want), mode)
		}
	}
	for e := range wantTar {
		if !seen[e] {
			t.Errorf("the tarball has no %s", e)
		}
	}

	// The Dockerfile's builder copies the binary out of this layout.
	src, _ := dockerReleaseCopy(t, parseDockerfile(t))
	rel, ok := strings.CutPrefix(src, "/dist/")
	if !ok {
		t.Fatalf("the Dockerfile copies %s, not out of /dist", src)
	}
	rel = strings.NewReplacer("$STRATA_VERSION", version, "$TARGETARCH", arch).Replace(rel)
	if b, err := os.ReadFile(filepath.Join(out, rel)); err != nil || !bytes.Equal(b, bin) {
		t.Errorf("the Dockerfile's cp source %s is not the release binary in the layout: %v", src, err)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
