package cli

import (
	"flag"
	"os"
)

// envString is a string flag that falls back to an environment variable.
// The variable is read after parsing (ApplyEnv), never used as the flag's
// default: the help prints defaults, so a secret taken from the
// environment as a default would appear in --help and in every usage error.
type envString struct {
	p     *string
	names []string // the flag's name, then its aliases
	env   string
	// secret: the value is a secret, kept out of configuration files
	// (ApplyConfigFile); the environment is the place for it.
	secret bool
	getenv func(string) string
	set    bool // given on the command line
	done   bool // the environment was read
}

func (v *envString) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

func (v *envString) flagNames() []string { return v.names }

func (v *envString) Set(s string) error {
	*v.p, v.set = s, true
	return nil
}

// apply takes the variable's value unless the flag was given; an empty or
// unset variable keeps the flag's default. Only the first call reads the
// environment, so a value the command sets afterwards stays.
func (v *envString) apply() {
	if v.set || v.done {
		return
	}
	v.done = true
	if s := v.getenv(v.env); s != "" {
		*v.p = s
	}
}

// envStringVar defines the flag names[0], with the aliases names[1:], bound
// to p, with default def, falling back to the environment variable env
// after parsing. The usage text names the variable and def; the help
// prints no default of its own, and shows the aliases with the flag.
func envStringVar(fs *flag.FlagSet, getenv func(string) string, p *string, env, def string, names []string, usage string) *envString {
	if getenv == nil {
		getenv = os.Getenv
	}
	*p = ""
	v := &envString{p: p, names: names, env: env, getenv: getenv}
	for i, n := range names {
		u := usage
		if i > 0 {
			u = "same as --" + names[0]
		}
		fs.Var(v, n, u)
	}
	*p = def
	return v
}

// ApplyEnv sets every flag of fs that falls back to an environment variable
// and was not given on the command line from that variable. Call it right
// after fs.Parse; calling it again changes nothing.
func ApplyEnv(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := f.Value.(*envString); ok {
			v.apply()
		}
	})
}
