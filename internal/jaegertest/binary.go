package jaegertest

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Version is the Jaeger the rig runs, the version tools/go.mod pins.
const Version = "v1.75.0"

// module is the Go module the jaeger command is built from.
const module = "github.com/jaegertracing/jaeger"

// BuildCommand builds and installs the binary Binary finds, from the
// repository's root.
const BuildCommand = "(cd tools && GOWORK=off go install " + module + "/cmd/jaeger)"

// Binary returns the path of a jaeger binary of Version: $GOBIN/jaeger,
// else the first $GOPATH's bin/jaeger ($HOME/go/bin/jaeger when GOPATH is
// unset), else jaeger on $PATH. The error says what is missing or which
// version was found.
func Binary() (string, error) {
	var candidates []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		candidates = append(candidates, filepath.Join(gobin, "jaeger"))
	}
	gopath, _, _ := strings.Cut(os.Getenv("GOPATH"), string(os.PathListSeparator))
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	if gopath != "" {
		candidates = append(candidates, filepath.Join(gopath, "bin", "jaeger"))
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		candidates = append(candidates, p)
	}
	var found []string
	for _, p := range candidates {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		v, err := builtVersion(p)
		if err == nil && v == Version {
			return p, nil
		}
		found = append(found, fmt.Sprintf("%s (%s)", p, cmpErr(v, err)))
	}
	if len(found) == 0 {
		return "", fmt.Errorf("jaegertest: no jaeger binary in %s", strings.Join(candidates, ", "))
	}
	return "", fmt.Errorf("jaegertest: no jaeger %s: found %s", Version, strings.Join(found, ", "))
}

// builtVersion reads the version of the jaeger module a binary was built
// from, out of its build information.
func builtVersion(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", err
	}
	if info.Main.Path == module {
		return info.Main.Version, nil
	}
	for _, d := range info.Deps {
		if d.Path == module {
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("not built from %s", module)
}

func cmpErr(version string, err error) string {
	if err != nil {
		return err.Error()
	}
	return "version " + version
}

// Require returns the jaeger binary's path. It skips the test when there
