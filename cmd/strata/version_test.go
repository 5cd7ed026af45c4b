package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionStringStamped(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/stratalog/strata", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "5f895e5abc"}, {Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	plat := " " + runtime.GOOS + "/" + runtime.GOARCH
	cases := []struct {
		s    stamp
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		// The release stamp wins over the build information.
		{stamp{"v1.2.3", "0123abcd", "2026-01-02T03:04:05Z"}, bi, true,
			"strata v1.2.3, revision 0123abcd (2026-01-02T03:04:05Z), go1.26.8" + plat},
		// A stamp without a commit takes Go's VCS revision and time.
		{stamp{"v1.2.3", "", ""}, bi, true,
			"strata v1.2.3, revision 5f895e5abc (2025-01-02T03:04:05Z), go1.26.8" + plat},
		{stamp{"v1.2.3-dirty", "", ""}, nil, false,
			"strata v1.2.3-dirty, revision unknown, " + runtime.Version() + plat},
		// No stamped version: the build information, as before.
		{stamp{"", "0123abcd", "2026-01-02T03:04:05Z"}, bi, true, formatVersion(bi, true)},
		{stamp{}, nil, false, formatVersion(nil, false)},
	}
	for _, c := range cases {
		if got := versionString(c.s, c.bi, c.ok); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.s, got, c.want)
		}
	}
}

// releaseBuild builds with scripts/release's flags (static, -trimpath),
// so that it shares the build cache with TestReleaseScript's build.
func releaseBuild(t *testing.T, out, ldflags string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
}

// The variables scripts/release sets with -ldflags -X exist under the
// names it uses, and `strata version` prints them.
func TestVersionLdflagsStamp(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "strata")
	releaseBuild(t, bin, "-s -w -X main.version=v9.8.7-rc.1-3-gabcdef0-dirty -X main.commit=abcdef0123456789 -X main.date=2026-03-04T05:06:07Z")
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", bin, arg, err, out)
		}
		want := "strata v9.8.7-rc.1-3-gabcdef0-dirty, revision abcdef0123456789 (2026-03-04T05:06:07Z), go"
		if got := string(out); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " "+runtime.GOOS+"/"+runtime.GOARCH+"\n") {
			t.Errorf("strata %s: %q, want %q...", arg, got, want)
		}
	}
}

// strata version --format json carries the line's facts one field each:
// for the stamped and unstamped builds of TestVersionStringStamped, the
// fields put back together give versionString's line; and the command
// prints one JSON document.
func TestVersionJSON(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/stratalog/strata", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "5f895e5abc"}, {Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	line := func(v versionJSON) string {
		src := "revision unknown"
		if v.Revision != "" {
			var notes []string
			if v.Time != "" {
				notes = append(notes, v.Time)
			}
			if v.Modified {
				notes = append(notes, "modified")
			}
			src = "revision " + v.Revision
			if len(notes) > 0 {
				src += " (" + strings.Join(notes, ", ") + ")"
			}
		}
		return "strata " + v.Version + ", " + src + ", " + v.Go + " " + v.OS + "/" + v.Arch
	}
	for _, c := range []struct {
		s  stamp
		bi *debug.BuildInfo
		ok bool
	}{
		{stamp{"v1.2.3", "0123abcd", "2026-01-02T03:04:05Z"}, bi, true},
		{stamp{"v1.2.3", "", ""}, bi, true},
		{stamp{"v1.2.3", "", "2026-01-02T03:04:05Z"}, bi, true},
		{stamp{"v1.2.3-dirty", "", ""}, nil, false},
		{stamp{"", "0123abcd", "2026-01-02T03:04:05Z"}, bi, true},
	} {
		v := versionInfo(c.s, c.bi, c.ok)
		if got, want := line(v), versionString(c.s, c.bi, c.ok); got != want {
			t.Errorf("%+v: fields %+v make %q, the line is %q", c.s, v, got, want)
		}
	}
	if v := versionInfo(stamp{}, nil, false); v.Version != "" || v.Revision != "" || v.Go != runtime.Version() {
		t.Errorf("no build information: %+v", v)
	}
	code, out, errOut := runCLI("version", "--format", "json")
	var v versionJSON
	if err := json.Unmarshal([]byte(out), &v); code != 0 || errOut != "" || err != nil || v.Version == "" || v.Go == "" || v.OS != runtime.GOOS || v.Arch != runtime.GOARCH {
		t.Errorf("version --format json: exit %d, %v, stderr %q\n%s", code, err, errOut, out)
	}
}
