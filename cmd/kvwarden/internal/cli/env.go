package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
)

// EnvPrefix starts the environment variable of every flag: --max-context
// is also KVWARDEN_MAX_CONTEXT, for containers and service managers that
// configure through the environment (as llama-server's LLAMA_ARG_* and
// ollama's OLLAMA_*). Precedence: the command line, then the environment,
// then the default.
const EnvPrefix = "KVWARDEN_"

// EnvName is the environment variable of flag name: KVWARDEN_ and the
// name in upper case with dashes as underscores.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// EnvHelp is the paragraph every command's help ends with.
const EnvHelp = `Every flag can also be set with an environment variable: KVWARDEN_ and
the flag's name in upper case with dashes as underscores (--max-context:
KVWARDEN_MAX_CONTEXT=2048; booleans take true or false). A flag given on
the command line wins over the environment, which wins over the default;
an empty variable counts as unset.
`

// applyEnv sets every flag that the command line did not set from its
// environment variable (one-letter shorthands have none). A flag that
// shares its variable with one given on the command line (-n and
// --max-tokens) is left alone: the command line wins. A bad value is a
// UsageError naming the variable.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	var given []flag.Value
	fs.Visit(func(f *flag.Flag) { given = append(given, f.Value) })
	sameVar := func(v flag.Value) bool {
		for _, g := range given {
			// Values of flags bound to one variable are the same pointer.
			if reflect.TypeOf(g) == reflect.TypeOf(v) && reflect.TypeOf(v).Comparable() && g == v {
				return true
			}
		}
		return false
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || len(f.Name) == 1 || sameVar(f.Value) {
			return
		}
		name := EnvName(f.Name)
		v, ok := lookup(name)
		if !ok || v == "" {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = Usagef("%s=%q (--%s): %v", name, v, f.Name, e)
		}
	})
	return err
}

// PrintFlags prints fs's flags as --name, with their defaults and
// environment variables, one blank-line-free block per flag.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintln(w, line)
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" && def != "[]" {
			if typ == "string" {
				def = fmt.Sprintf("%q", def)
			}
			usage += fmt.Sprintf(" (default %s)", def)
		}
		if len(f.Name) > 1 {
			usage += " [$" + EnvName(f.Name) + "]"
		}
		fmt.Fprintf(w, "    \t%s\n", usage)
	})
}

// osLookup is os.LookupEnv (a variable, for tests).
var osLookup = os.LookupEnv
