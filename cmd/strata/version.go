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

// versionJSON is `strata version --format json`: the same facts as the
// line, one field each.
type versionJSON struct {
	Version  string `json:"version"`            // the release stamp, else the module version ("(devel)" from a work tree; "" unknown)
	Revision string `json:"revision,omitempty"` // the VCS revision (omitted: unknown)
	Time     string `json:"time,omitempty"`     // the revision's time, RFC 3339
	Modified bool   `json:"modified"`           // built from a tree with uncommitted changes (unstamped builds only)
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// versionInfo is versionString's facts as fields, by the same rules: the
// stamp wins, a stamp without a commit takes the VCS revision and time.
func versionInfo(s stamp, bi *debug.BuildInfo, ok bool) versionJSON {
	v := versionJSON{Version: s.version, Revision: s.commit, Time: s.date, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if !ok || bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	stamped := s.version != ""
	if !stamped {
		v.Version, v.Revision, v.Time = bi.Main.Version, "", ""
		if v.Version == "" {
			v.Version = "(devel)"
		}
	}
	if stamped && s.commit != "" {
		return v
	}
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			v.Revision = kv.Value
		case "vcs.time":
			if v.Time == "" || !stamped {
				v.Time = kv.Value
			}
		case "vcs.modified":
			v.Modified = !stamped && kv.Value == "true"
		}
	}
	return v
}
