package main

import (
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
