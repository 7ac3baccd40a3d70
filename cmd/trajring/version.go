package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// newVersionCmd returns the version command.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the module and Go versions",
		Long: `Prints trajring's module version (from the build information: a tag such as
v0.3.0 for go install ...@v0.3.0, "(devel)" for a build from a checkout), the
VCS revision when the build recorded one, and the Go version and platform.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, ok := debug.ReadBuildInfo()
			writeVersion(cmd.OutOrStdout(), bi, ok)
			return nil
		},
	}
}

// modulePath is trajring's module path, shown when the build information
// is missing.
const modulePath = "github.com/trajring/trajring"

// writeVersion writes the version lines for the build information bi
// (ok false: none was embedded).
func writeVersion(w io.Writer, bi *debug.BuildInfo, ok bool) {
	version, path, goVersion := "unknown", modulePath, runtime.Version()
	var revision, modified string
	if ok && bi != nil {
		if bi.Main.Path != "" {
			path = bi.Main.Path
		}
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	fmt.Fprintf(w, "trajring %s\n", version)
	fmt.Fprintf(w, "module %s\n", path)
	if revision != "" {
		if modified == "true" {
			revision += " (modified)"
		}
		fmt.Fprintf(w, "revision %s\n", revision)
	}
	fmt.Fprintf(w, "go %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
}
