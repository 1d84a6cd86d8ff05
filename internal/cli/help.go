package cli

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"weak"
)

// flagGroup is a titled list of flags in a command's help.
type flagGroup struct {
	title string
	names []string
}

// flagSetInfo is what the help and the configuration file know of a flag
// set beyond the flag package: its groups and its repeatable flags.
type flagSetInfo struct {
	groups     []flagGroup
	repeatable map[string]bool
}

// infos holds each flag set's flagSetInfo, dropped once the flag set is
// garbage.
var infos = struct {
	sync.Mutex
	of map[weak.Pointer[flag.FlagSet]]*flagSetInfo
}{of: map[weak.Pointer[flag.FlagSet]]*flagSetInfo{}}

// updateInfo runs update on fs's information, made empty the first time.
func updateInfo(fs *flag.FlagSet, update func(*flagSetInfo)) {
	infos.Lock()
	defer infos.Unlock()
	key := weak.Make(fs)
	info := infos.of[key]
	if info == nil {
		info = &flagSetInfo{repeatable: map[string]bool{}}
		infos.of[key] = info
		runtime.AddCleanup(fs, func(key weak.Pointer[flag.FlagSet]) {
			infos.Lock()
			delete(infos.of, key)
			infos.Unlock()
		}, key)
	}
	update(info)
}

// infoOf returns a copy of fs's information (empty when it has none).
func infoOf(fs *flag.FlagSet) flagSetInfo {
	var c flagSetInfo
	updateInfo(fs, func(info *flagSetInfo) {
		c.groups = append(c.groups, info.groups...)
		c.repeatable = make(map[string]bool, len(info.repeatable))
		for n := range info.repeatable {
			c.repeatable[n] = true
		}
	})
	return c
}

// mustHave panics unless fs defines every flag of names: naming a flag
// that does not exist is a mistake in the program.
func mustHave(fs *flag.FlagSet, what string, names []string) {
	for _, n := range names {
		if fs.Lookup(n) == nil {
			panic(fmt.Sprintf("cli.%s: %s has no flag --%s", what, fs.Name(), n))
		}
	}
}

// Group shows the flags named names, in that order, under title in fs's
// help (PrintFlags). Groups come in the order they are made; the flags of
// no group come last. Call it once the flags are defined; an alias is
// shown with its flag, never named here.
func Group(fs *flag.FlagSet, title string, names ...string) {
	mustHave(fs, "Group", names)
	updateInfo(fs, func(info *flagSetInfo) {
		info.groups = append(info.groups, flagGroup{title: title, names: names})
	})
}

// Repeatable marks the flags named names as taking several values, one
// per use: a configuration file may give them on several lines
// (ApplyConfigFile).
func Repeatable(fs *flag.FlagSet, names ...string) {
	mustHave(fs, "Repeatable", names)
	updateInfo(fs, func(info *flagSetInfo) {
		for _, n := range names {
			info.repeatable[n] = true
		}
	})
}

// aliased is a flag value defined under more than one name; the first is
// the flag's own, the others its aliases.
type aliased interface{ flagNames() []string }

// isAlias reports whether f is another name of a flag defined first.
func isAlias(f *flag.Flag) bool {
	a, ok := f.Value.(aliased)
	return ok && a.flagNames()[0] != f.Name
}

// PrintFlags writes fs's flags to w, by group (Group), each as
//
//	--name, --alias TYPE
//	    usage (default D)
//
// with TYPE the back-quoted word of its usage, as flag.UnquoteUsage gives
// it, and its default as flag.PrintDefaults shows it. The flags of no
// group come last, in alphabetical order, under "Flags" (or "Other flags"
// after groups).
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	groups := infoOf(fs).groups
	placed := map[string]bool{}
	for _, g := range groups {
		for _, n := range g.names {
			placed[n] = true
		}
	}
	var rest []string
	fs.VisitAll(func(f *flag.Flag) {
		if !placed[f.Name] && !isAlias(f) {
			rest = append(rest, f.Name)
		}
	})
	if len(rest) > 0 {
		title := "Flags"
		if len(groups) > 0 {
			title = "Other flags"
		}
		groups = append(groups, flagGroup{title: title, names: rest})
	}
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s:\n", g.title)
		for _, n := range g.names {
			printFlag(w, fs.Lookup(n))
		}
	}
}

// printFlag writes one flag's entry of PrintFlags.
func printFlag(w io.Writer, f *flag.Flag) {
	names := []string{f.Name}
	if a, ok := f.Value.(aliased); ok {
		names = a.flagNames()
	}
	typ, usage := flag.UnquoteUsage(f)
	spelled := make([]string, len(names))
	for i, n := range names {
		spelled[i] = dashed(n)
	}
	head := "  " + strings.Join(spelled, ", ")
	if typ != "" {
		// A type the flag package names (duration, int, string) is shown
		// as the back-quoted words are: in capitals.
		head += " " + strings.ToUpper(typ)
	}
	if !isZeroValue(f) {
		usage += " (default " + shownDefault(f) + ")"
	}
	fmt.Fprintln(w, head)
	for _, line := range strings.Split(usage, "\n") {
		fmt.Fprintln(w, "      "+line)
	}
}

// dashed is a flag's name as a command line spells it: -o for a
// one-letter name, --name for the others.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// shownDefault is f's default as flag.PrintDefaults shows it: quoted for a
// string flag.
func shownDefault(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		if _, ok := g.Get().(string); ok {
			return fmt.Sprintf("%q", f.DefValue)
		}
	}
	return f.DefValue
}

// isZeroValue reports whether f's default is its type's zero value, which
// the help leaves out, as flag.PrintDefaults does. A type whose String
// fails on its zero value counts as zero.
func isZeroValue(f *flag.Flag) (zero bool) {
	typ := reflect.TypeOf(f.Value)
	var z reflect.Value
	if typ.Kind() == reflect.Pointer {
		z = reflect.New(typ.Elem())
	} else {
		z = reflect.Zero(typ)
	}
	defer func() {
		if recover() != nil {
			zero = true
		}
	}()
	return f.DefValue == z.Interface().(flag.Value).String()
}
