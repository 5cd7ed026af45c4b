package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// stamp is what the release build links into the binary (main.go's
// version, commit and date; scripts/release sets them with -ldflags -X).
type stamp struct {
	version string
	commit  string
	date    string
}

// versionString is `strata version`'s line. With a stamped version it has
// the same shape as formatVersion's ("strata VERSION, revision COMMIT
// (DATE), GOVERSION OS/ARCH"); a stamp without a commit takes the VCS
// revision from the build information when there is one. Without a
// stamped version it is formatVersion's line from the build information.
func versionString(s stamp, bi *debug.BuildInfo, ok bool) string {
	if s.version == "" {
		return formatVersion(bi, ok)
	}
	goVersion := runtime.Version()
	if ok && bi != nil {
		if s.commit == "" {
			for _, kv := range bi.Settings {
				switch kv.Key {
				case "vcs.revision":
					s.commit = kv.Value
				case "vcs.time":
					if s.date == "" {
						s.date = kv.Value
					}
				}
			}
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	src := "revision unknown"
	if s.commit != "" {
		src = "revision " + s.commit
		if s.date != "" {
			src += " (" + s.date + ")"
		}
	}
	return fmt.Sprintf("strata %s, %s, %s %s/%s", s.version, src, goVersion, runtime.GOOS, runtime.GOARCH)
}
