package deploytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// The manifests under deploy/ run our binaries with command lines that no
// compiler checks. TestManifests extracts each container's command line
// from deploy/docker-compose.yml and every file in deploy/kubernetes/, maps
// the paths that refer to mounted files onto test directories (only through
// the mounts the manifest declares, so a missing mount is a missing file),
// and runs it through the command's own --check-config.

const deployDir = "../../../deploy"

// ourBinaries are the commands shipped as images sendtwice/NAME.
var ourBinaries = []string{"executor", "provider", "publisher"}

// buildBinaries builds our commands into a test directory.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, b := range ourBinaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// binaryOf names our binary run by an image sendtwice/NAME[:TAG], or "".
func binaryOf(image string) string {
	rest, ok := strings.CutPrefix(image, "sendtwice/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ":")
	return name
}

// mounts maps absolute paths inside a container to directories of the test.
type mounts map[string]string

// resolve rewrites an argument that is an absolute path (or --flag=PATH)
// to the test directory of the mount it lies on. A path on no mount is an
// error: the container would not find the file (or, with a read-only root
// file system, could not write it).
func (m mounts) resolve(arg string) (string, error) {
	prefix, val := "", arg
	if strings.HasPrefix(arg, "-") {
		i := strings.IndexByte(arg, '=')
		if i < 0 {
			return arg, nil
		}
		prefix, val = arg[:i+1], arg[i+1:]
	}
	if !strings.HasPrefix(val, "/") {
		return arg, nil
	}
	best := ""
	for dst := range m {
		if (val == dst || strings.HasPrefix(val, strings.TrimSuffix(dst, "/")+"/")) && len(dst) > len(best) {
			best = dst
		}
	}
	if best == "" {
		return "", fmt.Errorf("path %s is on no mount of the container", val)
	}
	return prefix + filepath.Join(m[best], filepath.FromSlash(strings.TrimPrefix(val, best))), nil
}

// commandLine is one container's command for one of our binaries.
type commandLine struct {
	where  string // e.g. "docker-compose.yml service executor-1"
	binary string
	args   []string
	env    map[string]string
	mounts mounts
}

// checkConfig runs the command line with --check-config and fails the test
// unless it exits 0.
func checkConfig(t *testing.T, bin string, c commandLine) {
	t.Helper()
	args := make([]string, 0, len(c.args)+1)
	for _, a := range c.args {
		r, err := c.mounts.resolve(a)
		if err != nil {
			t.Errorf("%s: %v", c.where, err)
			return
		}
		args = append(args, r)
	}
	args = append(args, "--check-config")
	out, err := runBinary(t, filepath.Join(bin, c.binary), c.env, args)
	if err != nil {
		t.Errorf("%s: %s %s --check-config: %v\n%s", c.where, c.binary, strings.Join(c.args, " "), err, lastLines(out, 3))
	}
}

// lastLines is the end of a command's output, past any usage text.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// runBinary runs a binary with only the given environment (and HOME), so
// that nothing of the test's own environment leaks into the check.
func runBinary(t *testing.T, bin string, env map[string]string, args []string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + cmd.Dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd.CombinedOutput()
}

// trustedApproversFile makes a real trusted-approvers file with publisher
// keygen and returns its contents.
func trustedApproversFile(t *testing.T, bin string) []byte {
	t.Helper()
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted-approvers.json")
	if out, err := runBinary(t, filepath.Join(bin, "publisher"), nil,
		[]string{"keygen", "--name", "fixture-reviewer", "--dir", dir, "--trusted", trusted}); err != nil {
		t.Fatalf("publisher keygen: %v\n%s", err, out)
	}
	b, err := os.ReadFile(trusted)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFiles makes a directory holding the given files.
func writeFiles(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	bin := buildBinaries(t)
	trusted := trustedApproversFile(t, bin)

	t.Run("compose", func(t *testing.T) {
		cf := loadCompose(t)
		// What the named volumes hold when the services start. The example
		// at the top of docker-compose.yml fills trusted-approvers with
		// publisher keygen (checked in compose-example); here a real file
		// stands in. A volume missing here fails the test: say what it
		// holds.
		fixtures := map[string]map[string][]byte{
			"trusted-approvers": {"trusted-approvers.json": trusted},
			"provider":          {},
			"reviewer":          {},
		}
		dirs := map[string]string{}
		volumeDir := func(name string) (string, error) {
			files, ok := fixtures[name]
			if !ok {
				return "", fmt.Errorf("named volume %q has no fixture in this test", name)
			}
			if dirs[name] == "" {
				dirs[name] = writeFiles(t, files)
			}
			return dirs[name], nil
		}
		lines := cf.commandLines(t, volumeDir)
		if len(lines) == 0 {
			t.Fatal("no command line of ours in docker-compose.yml")
		}
		for _, c := range lines {
			checkConfig(t, bin, c)
		}
	})

	t.Run("dockerfile", func(t *testing.T) {
		// The images' default commands, with what their runner mounts
		// (the Dockerfile's comments and VOLUME say where).
		imageMounts := map[string]mounts{
			"executor": {"/etc/sendtwice": writeFiles(t, map[string][]byte{"trusted-approvers.json": trusted})},
			"provider": {"/data": t.TempDir()},
		}
		cmds := dockerfileCommands(t)
		for _, b := range []string{"executor", "provider"} {
			args, ok := cmds[b]
			if !ok {
				t.Errorf("deploy/Dockerfile: stage %s has no CMD", b)
				continue
			}
			checkConfig(t, bin, commandLine{where: "deploy/Dockerfile stage " + b, binary: b, args: args, mounts: imageMounts[b]})
		}
	})

	t.Run("compose-example", func(t *testing.T) {
		testComposeExample(t, bin)
	})

	t.Run("kubernetes", func(t *testing.T) {
		docs := loadKubernetes(t)
		// The ConfigMaps and Secrets that are made outside the manifests
		// (see the top of sendtwice.yaml), with what they hold.
		external := map[string]map[string][]byte{
			"configMap/trusted-approvers": {"trusted-approvers.json": trusted},
		}
		var lines []commandLine
		for _, d := range docs {
			lines = append(lines, d.commandLines(t, docs, external)...)
		}
		if len(lines) == 0 {
			t.Fatal("no command line of ours in deploy/kubernetes")
		}
		for _, c := range lines {
			checkConfig(t, bin, c)
		}
	})
}

// dockerfileCommands are the CMDs (JSON form) of the Dockerfile's stages,
// by stage name.
func dockerfileCommands(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := map[string][]string{}
	stage, continued := "", false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		wasContinued := continued
		continued = strings.HasSuffix(strings.TrimSpace(line), "\\")
		switch {
		case wasContinued: // e.g. HEALTHCHECK's own CMD
		case len(f) >= 4 && strings.EqualFold(f[0], "FROM") && strings.EqualFold(f[len(f)-2], "AS"):
			stage = f[len(f)-1]
		case len(f) > 0 && f[0] == "CMD":
			var args []string
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "CMD"))), &args); err != nil {
				t.Errorf("deploy/Dockerfile stage %s: CMD is not a JSON array: %v", stage, err)
				continue
			}
			cmds[stage] = args
		}
	}
	return cmds
}

// --- docker compose ---------------------------------------------------------

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(b, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(cf.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	for name, s := range cf.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("docker-compose.yml: service %s has neither image nor build", name)
		}
		for _, v := range s.Volumes {
			src, _, ok := strings.Cut(v, ":")
			if !ok {
				t.Errorf("docker-compose.yml: service %s: volume %q is not SOURCE:TARGET", name, v)
				continue
			}
			if !isBindSource(src) {
				if _, declared := cf.Volumes[src]; !declared {
					t.Errorf("docker-compose.yml: service %s uses volume %q, not declared under volumes:", name, src)
				}
			}
		}
	}
	return cf
}

func isBindSource(src string) bool {
	return strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~")
}

// mountsOf maps a service's volume targets to test directories: a bind
// mount to the repository's directory, a named volume to volumeDir's.
func (s composeService) mountsOf(volumeDir func(string) (string, error)) (mounts, error) {
	m := mounts{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			return nil, fmt.Errorf("volume %q is not SOURCE:TARGET", v)
		}
		src, dst := parts[0], parts[1]
		if isBindSource(src) {
			abs, err := filepath.Abs(filepath.Join(deployDir, filepath.FromSlash(src)))
			if err != nil {
				return nil, err
			}
			m[dst] = abs
			continue
		}
		dir, err := volumeDir(src)
		if err != nil {
			return nil, err
		}
		m[dst] = dir
	}
	return m, nil
}

// commandLines are the services' command lines for our binaries. A service
// of ours without a command (the publisher, run by hand) is skipped.
func (cf composeFile) commandLines(t *testing.T, volumeDir func(string) (string, error)) []commandLine {
	t.Helper()
	names := make([]string, 0, len(cf.Services))
	for n := range cf.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	var lines []commandLine
	for _, n := range names {
		s := cf.Services[n]
		b := binaryOf(s.Image)
		if b == "" || len(s.Command) == 0 {
			continue
		}
		if len(s.Entrypoint) > 0 {
			t.Errorf("docker-compose.yml service %s: an entrypoint replaces the image's; this test assumes the image's", n)
			continue
		}
		m, err := s.mountsOf(volumeDir)
		if err != nil {
			t.Errorf("docker-compose.yml service %s: %v", n, err)
			continue
		}
		lines = append(lines, commandLine{
			where: "docker-compose.yml service " + n, binary: b,
			args: s.Command, env: s.Environment, mounts: m,
		})
	}
	return lines
}

// exampleCommands are the `docker compose ... run --rm SERVICE ARGS...`
// commands in the comment at the top of docker-compose.yml, in order.
func exampleCommands(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(deployDir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var joined []string
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "#") {
			break
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if c, ok := strings.CutSuffix(line, "\\"); ok {
			cur += c + " "
			continue
		}
		joined = append(joined, cur+line)
		cur = ""
	}
	var cmds [][]string
	for _, l := range joined {
		fields := strings.Fields(l)
		if len(fields) < 2 || fields[0] != "docker" || fields[1] != "compose" {
			continue
		}
		for i := 2; i+2 < len(fields); i++ {
			if fields[i] == "run" && fields[i+1] == "--rm" {
				cmds = append(cmds, fields[i+2:])
				break
			}
		}
	}
	return cmds
}

// testComposeExample follows the example at the top of docker-compose.yml
// with the publisher's and the executors' volumes as test directories: its
// keygen writes the file the executors read, the approval it makes is
// signed by a key they trust, and send names files that exist.
func testComposeExample(t *testing.T, bin string) {
	cf := loadCompose(t)
	dirs := map[string]string{}
	volumeDir := func(name string) (string, error) {
		if dirs[name] == "" {
			dirs[name] = t.TempDir() // named volumes start empty
		}
		return dirs[name], nil
	}
	publisher, ok := cf.Services["publisher"]
	if !ok {
		t.Fatal("docker-compose.yml has no publisher service")
	}
	pm, err := publisher.mountsOf(volumeDir)
	if err != nil {
		t.Fatalf("publisher: %v", err)
	}
	var sent, keygen int
	for _, cmd := range exampleCommands(t) {
		service, args := cmd[0], cmd[1:]
		if service != "publisher" || len(args) == 0 {
			t.Errorf("example runs %q: this test knows only publisher", strings.Join(cmd, " "))
			continue
		}
		resolved := make([]string, len(args))
		for i, a := range args {
			if resolved[i], err = pm.resolve(a); err != nil {
				t.Fatalf("example %q: %v", strings.Join(cmd, " "), err)
			}
		}
		if args[0] == "send" {
			// send needs the cluster: check what it would send, as the
			// executors would.
			sent++
			checkSentApproval(t, cf, volumeDir, resolved[1:])
			continue
		}
		if args[0] == "keygen" {
			keygen++
		}
		if out, err := runBinary(t, filepath.Join(bin, "publisher"), publisher.Environment, resolved); err != nil {
			t.Fatalf("example %q: %v\n%s", strings.Join(cmd, " "), err, out)
		}
		if args[0] == "keygen" {
			// The executors now find what they need in their volumes.
			for _, c := range cf.commandLines(t, volumeDir) {
				checkConfig(t, bin, c)
			}
		}
	}
	if keygen == 0 {
		t.Error("the example makes no reviewer key (publisher keygen --trusted): the executors have no trusted approvers")
	}
	if sent == 0 {
		t.Error("the example sends nothing (publisher send)")
	}
}

// checkSentApproval runs the executors' gate, with the trusted approvers of
// the first executor's --trusted-approvers, on the documents that send's
// (resolved) flags name.
func checkSentApproval(t *testing.T, cf composeFile, volumeDir func(string) (string, error), sendArgs []string) {
	t.Helper()
	files := map[string]string{}
	for i := 0; i+1 < len(sendArgs); i++ {
		switch sendArgs[i] {
		case "--candidate", "--request", "--approval":
			files[sendArgs[i]] = sendArgs[i+1]
		}
	}
	docs := map[string][]byte{}
	for _, f := range []string{"--candidate", "--request", "--approval"} {
		if files[f] == "" {
			t.Fatalf("example send has no %s", f)
		}
		b, err := os.ReadFile(files[f])
		if err != nil {
			t.Fatalf("example send %s: %v", f, err)
		}
		docs[f] = b
	}
	var trustedPath string
	for _, c := range cf.commandLines(t, volumeDir) {
		if c.binary != "executor" {
			continue
		}
		for i := 0; i+1 < len(c.args); i++ {
			if c.args[i] == "--trusted-approvers" {
				p, err := c.mounts.resolve(c.args[i+1])
				if err != nil {
					t.Fatalf("%s: %v", c.where, err)
				}
				trustedPath = p
			}
		}
		break
	}
	if trustedPath == "" {
		t.Fatal("the executors have no --trusted-approvers")
	}
	keys, err := sign.LoadTrusted(trustedPath)
	if err != nil {
		t.Fatalf("the executors' trusted approvers: %v", err)
	}
	env, err := document.BuildEnvelope(docs["--candidate"], docs["--request"], docs["--approval"])
	if err != nil {
		t.Fatal(err)
	}
	checker := &gate.Checker{Keys: keys}
	if _, err := checker.Check(env); err != nil {
		t.Errorf("an executor would refuse the example's approval: %v", err)
	}
}

// --- Kubernetes -------------------------------------------------------------

type k8sDoc struct {
	file       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template    *podTemplate `yaml:"template"`
		JobTemplate *struct {
			Spec struct {
				Template *podTemplate `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type podTemplate struct {
	Spec struct {
		Containers     []container `yaml:"containers"`
		InitContainers []container `yaml:"initContainers"`
		Volumes        []k8sVolume `yaml:"volumes"`
	} `yaml:"spec"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type keyPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type k8sVolume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string    `yaml:"name"`
		Items []keyPath `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string    `yaml:"secretName"`
		Items      []keyPath `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir              any `yaml:"emptyDir"`
	PersistentVolumeClaim any `yaml:"persistentVolumeClaim"`
}

// loadKubernetes parses every manifest in deploy/kubernetes and checks
// that each document has apiVersion, kind and metadata.name.
func loadKubernetes(t *testing.T) []k8sDoc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.y*ml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var docs []k8sDoc
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var d k8sDoc
			if err := dec.Decode(&d); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			d.file = filepath.Base(f)
			if d.APIVersion == "" || d.Kind == "" || d.Metadata.Name == "" {
				t.Errorf("%s document %d: want apiVersion, kind and metadata.name", f, i)
			}
			docs = append(docs, d)
		}
	}
	return docs
}

var k8sVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// commandLines are the document's containers' command lines for our
// binaries, with their volumes mapped to test directories: a ConfigMap or
// Secret to its data (from the manifests, else from external), anything
// else to an empty directory. The mounts of every container are checked
// against the pod's volumes.
func (d k8sDoc) commandLines(t *testing.T, all []k8sDoc, external map[string]map[string][]byte) []commandLine {
	t.Helper()
	tmpl := d.Spec.Template
	if d.Spec.JobTemplate != nil {
		tmpl = d.Spec.JobTemplate.Spec.Template
	}
	if tmpl == nil {
		return nil
	}
	where := d.file + " " + d.Kind + "/" + d.Metadata.Name
	volumes := map[string]k8sVolume{}
	for _, v := range tmpl.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range d.Spec.VolumeClaimTemplates {
		volumes[c.Metadata.Name] = k8sVolume{Name: c.Metadata.Name, PersistentVolumeClaim: struct{}{}}
	}
	var lines []commandLine
	for _, c := range append(append([]container{}, tmpl.Spec.InitContainers...), tmpl.Spec.Containers...) {
		cw := where + " container " + c.Name
		if c.Name == "" || c.Image == "" {
			t.Errorf("%s: a container needs name and image", cw)
		}
		m := mounts{}
		for _, vm := range c.VolumeMounts {
			v, ok := volumes[vm.Name]
			if !ok {
				t.Errorf("%s: mounts volume %q, which the pod does not have", cw, vm.Name)
				continue
			}
			dir, err := volumeFiles(t, v, all, external)
			if err != nil {
				t.Errorf("%s: volume %s: %v", cw, vm.Name, err)
				continue
			}
			m[vm.MountPath] = filepath.Join(dir, filepath.FromSlash(vm.SubPath))
		}
		b := binaryOf(c.Image)
		if b == "" {
			continue
		}
		args := c.Args
		if len(c.Command) > 0 {
			if path.Base(c.Command[0]) != b {
				t.Errorf("%s: command %q is not the image's binary %s", cw, c.Command[0], b)
				continue
			}
			args = append(append([]string{}, c.Command[1:]...), c.Args...)
		}
		if len(args) == 0 {
			continue
		}
		env := map[string]string{}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
				env[e.Name] = d.Metadata.Name + "-0"
			case e.ValueFrom != nil:
				env[e.Name] = "value-of-" + strings.ToLower(e.Name)
			default:
				env[e.Name] = k8sVarRef.ReplaceAllStringFunc(e.Value, func(s string) string { return expand(s, env) })
			}
		}
		expanded := make([]string, len(args))
		for i, a := range args {
			expanded[i] = k8sVarRef.ReplaceAllStringFunc(a, func(s string) string { return expand(s, env) })
		}
		lines = append(lines, commandLine{where: cw, binary: b, args: expanded, env: env, mounts: m})
	}
	return lines
}

// expand replaces one $(NAME) as Kubernetes does: with the variable's value
// when it is defined, else left as it is.
func expand(ref string, env map[string]string) string {
	name := ref[2 : len(ref)-1]
	if v, ok := env[name]; ok {
		return v
	}
	return ref
}

// volumeFiles makes a directory with what a pod volume holds.
func volumeFiles(t *testing.T, v k8sVolume, all []k8sDoc, external map[string]map[string][]byte) (string, error) {
	t.Helper()
	var kind, name string
	var items []keyPath
	switch {
	case v.ConfigMap != nil:
		kind, name, items = "configMap", v.ConfigMap.Name, v.ConfigMap.Items
	case v.Secret != nil:
		kind, name, items = "secret", v.Secret.SecretName, v.Secret.Items
	case v.EmptyDir != nil, v.PersistentVolumeClaim != nil:
		return t.TempDir(), nil
	default:
		return "", fmt.Errorf("a kind of volume this test does not know")
	}
	data, ok := external[kind+"/"+name]
	if !ok {
		for _, d := range all {
			if strings.EqualFold(d.Kind, kind) && d.Metadata.Name == name {
				data = map[string][]byte{}
				for k, s := range d.Data {
					data[k] = []byte(s)
				}
				ok = true
			}
		}
	}
	if !ok {
		return "", fmt.Errorf("%s %q is neither in the manifests nor known to this test", kind, name)
	}
	if len(items) > 0 {
		projected := map[string][]byte{}
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				return "", fmt.Errorf("%s %q has no key %q", kind, name, it.Key)
			}
			projected[it.Path] = b
		}
		data = projected
	}
	return writeFiles(t, data), nil
}
