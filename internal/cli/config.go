package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// configLine is one "name = value" line of a configuration file.
type configLine struct {
	line        int
	name, value string
}

// parseConfig reads the lines of a configuration file named path: one
// "name = value" a line, the name a flag's long name without dashes, the
// value the rest of the line (spaces around it dropped) or a Go string in
// double quotes. Blank lines and lines starting with # are skipped.
func parseConfig(path string, data []byte) ([]configLine, error) {
	var lines []configLine
	for i, text := range strings.Split(string(data), "\n") {
		text = strings.TrimSpace(text)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		n := i + 1
		name, value, ok := strings.Cut(text, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok:
			return nil, fmt.Errorf("%s:%d: %q: want name = value", path, n, text)
		case name == "":
			return nil, fmt.Errorf("%s:%d: no name before =", path, n)
		case strings.HasPrefix(name, "-"):
			return nil, fmt.Errorf("%s:%d: %s: write the flag's name without dashes", path, n, name)
		case strings.ContainsAny(name, " \t\"'`"):
			return nil, fmt.Errorf("%s:%d: %q: a name is one word, a flag's", path, n, name)
		}
		if strings.HasPrefix(value, `"`) {
			s, err := strconv.Unquote(value)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: the value %s is not a Go string in double quotes: %w", path, n, name, value, err)
			}
			value = s
		}
		lines = append(lines, configLine{line: n, name: name, value: value})
	}
	return lines, nil
}

// ApplyConfigFile sets the flags of fs from the configuration file at path
// (nothing when path is empty): one "name = value" a line (parseConfig),
// a repeatable flag (Repeatable) on as many lines as it has values. A flag
// given on the command line (set in fs before the call) keeps its value:
// its lines are checked but not applied. An unknown name, a flag given twice
// that is not repeatable, a secret (which goes in the environment), the
// name config and a value the flag refuses are errors that name the file,
// the line and why. The names are checked in the whole file before any
// flag is set; a refused value stops the file there, the flags of the
// lines before it set: on any error, the command must not run.
func ApplyConfigFile(fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the configuration file: %w", err)
	}
	lines, err := parseConfig(path, data)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[flagName(f)] = true })
	repeatable := infoOf(fs).repeatable
	first := map[string]int{}
	for _, l := range lines {
		f := fs.Lookup(l.name)
		if err := refusedInFile(f, l.name); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, l.line, l.name, err)
		}
		name := flagName(f)
		if n, twice := first[name]; twice && !repeatable[name] {
			return fmt.Errorf("%s:%d: %s: given twice (first on line %d); only a repeatable flag may be", path, l.line, l.name, n)
		}
		first[name] = l.line
	}
	for _, l := range lines {
		if given[flagName(fs.Lookup(l.name))] {
			continue
		}
		if err := fs.Set(l.name, l.value); err != nil {
			return fmt.Errorf("%s:%d: %s: the value %q is refused: %w", path, l.line, l.name, l.value, err)
		}
	}
	return nil
}

// errNotAFlag is refusedInFile's answer for a name that no flag has.
var errNotAFlag = errors.New("unknown key: no flag has this name")

// refusedInFile says why the flag f, named name in a configuration file,
// may not be set there, or nil.
func refusedInFile(f *flag.Flag, name string) error {
	switch {
	case name == "config":
		return errors.New("a configuration file cannot name another")
	case f == nil:
		return errNotAFlag
	}
	if v, ok := f.Value.(*envString); ok && v.secret {
		return fmt.Errorf("a secret stays out of the configuration file: give it in $%s", v.env)
	}
	return nil
}

// flagName is f's own name, the same for its aliases.
func flagName(f *flag.Flag) string {
	if a, ok := f.Value.(aliased); ok {
		return a.flagNames()[0]
	}
	return f.Name
}
