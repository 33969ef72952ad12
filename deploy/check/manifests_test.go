// Package check validates deploy/: every Kubernetes object decodes
// strictly (no unknown or misspelt field) into its API type, and the
// objects agree with each other and with the kvwarden command (labels,
// ports, probes, flags). No cluster is needed. It is a module of its own so
// that the Kubernetes API types stay out of kvwarden's dependencies.
package check

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// InferencePool mirrors inference.networking.k8s.io/v1 InferencePool (the
// Gateway API Inference Extension's v1 API, whose Go module is not on the
// module proxy): the fields a pool may set, so that strict decoding
// rejects anything else.
type InferencePool struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		TargetPorts []struct {
			Number int32 `json:"number"`
		} `json:"targetPorts"`
		AppProtocol       string `json:"appProtocol,omitempty"`
		EndpointPickerRef struct {
			Group *string `json:"group,omitempty"`
			Kind  string  `json:"kind,omitempty"`
			Name  string  `json:"name"`
			Port  *struct {
				Number int32 `json:"number"`
			} `json:"port,omitempty"`
			FailureMode string `json:"failureMode,omitempty"`
		} `json:"endpointPickerRef"`
	} `json:"spec"`
}

type objects struct {
	deploy *appsv1.Deployment
	svc    *corev1.Service
	pool   *InferencePool
	route  *gatewayv1.HTTPRoute
}

func load(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob("../kubernetes/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var o objects
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct{ APIVersion, Kind string }
			require.NoError(t, yaml.Unmarshal([]byte(doc), &head), "%s doc %d", f, i)
			where := f + ": " + head.Kind
			strict := func(v any) {
				require.NoError(t, yaml.UnmarshalStrict([]byte(doc), v), where)
			}
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 Deployment":
				o.deploy = &appsv1.Deployment{}
				strict(o.deploy)
			case "v1 Service":
				o.svc = &corev1.Service{}
				strict(o.svc)
			case "inference.networking.k8s.io/v1 InferencePool":
				o.pool = &InferencePool{}
				strict(o.pool)
			case "gateway.networking.k8s.io/v1 HTTPRoute":
				o.route = &gatewayv1.HTTPRoute{}
				strict(o.route)
			default:
				t.Fatalf("%s: unexpected object %s %s", f, head.APIVersion, head.Kind)
			}
		}
	}
	require.NotNil(t, o.deploy, "a Deployment")
	require.NotNil(t, o.svc, "a Service")
	require.NotNil(t, o.pool, "an InferencePool")
	require.NotNil(t, o.route, "an HTTPRoute")
	return o
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestManifests(t *testing.T) {
	o := load(t)
	d := o.deploy
	pod := d.Spec.Template
	require.True(t, matches(d.Spec.Selector.MatchLabels, pod.Labels), "the Deployment selects its own pods")
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "http" {
			port = &c.Ports[i]
		}
	}
	require.NotNil(t, port, "a port named http")

	// The command line is kvwarden serve listening on that port, with
	// flags the command has.
	require.Equal(t, "serve", c.Args[0])
	require.Contains(t, c.Args, "--addr=0.0.0.0:"+itoa(port.ContainerPort))
	src := kvwardenSource(t)
	for _, a := range c.Args[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.True(t, strings.HasPrefix(a, "--"), a)
		require.Contains(t, src, `"`+name+`"`, "kvwarden has no flag --%s", name)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		require.NotNil(t, p, name)
		require.Equal(t, "/healthz", p.HTTPGet.Path, name)
		require.Equal(t, intstr.FromString("http"), p.HTTPGet.Port, name)
	}
	require.NotNil(t, pod.Spec.TerminationGracePeriodSeconds)
	require.Greater(t, *pod.Spec.TerminationGracePeriodSeconds, int64(30), "longer than the server's 30s drain")

	// The Service selects the pods and forwards to the named port.
	require.True(t, matches(o.svc.Spec.Selector, pod.Labels))
	require.Equal(t, intstr.FromString("http"), o.svc.Spec.Ports[0].TargetPort)

	// The pool selects the same pods on the same port and names its picker.
	p := o.pool.Spec
	require.True(t, matches(p.Selector.MatchLabels, pod.Labels), "the InferencePool selects the kvwarden pods")
	require.Len(t, p.TargetPorts, 1)
	require.Equal(t, port.ContainerPort, p.TargetPorts[0].Number)
	require.NotEmpty(t, p.EndpointPickerRef.Name)
	require.NotNil(t, p.EndpointPickerRef.Port)
	require.Contains(t, []string{"", "FailOpen", "FailClose"}, p.EndpointPickerRef.FailureMode)
	require.Contains(t, []string{"", "http", "kubernetes.io/h2c"}, p.AppProtocol)

	// The route sends traffic to the pool.
	require.Len(t, o.route.Spec.Rules, 1)
	ref := o.route.Spec.Rules[0].BackendRefs[0]
	require.Equal(t, "inference.networking.k8s.io", string(*ref.Group))
	require.Equal(t, "InferencePool", string(*ref.Kind))
	require.Equal(t, o.pool.Metadata.Name, string(ref.Name))
}

// TestMetricNamesDocumented: the manifests and the server agree on the
// metric names the endpoint picker reads.
func TestMetricNamesDocumented(t *testing.T) {
	raw, err := os.ReadFile("../kubernetes/inferencepool.yaml")
	require.NoError(t, err)
	gw, err := os.ReadFile("../../server/internal/metrics/gateway.go")
	require.NoError(t, err)
	for _, name := range []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} {
		require.Contains(t, string(raw), name)
		require.Contains(t, string(gw), `"`+name+`"`)
	}
}

func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	df := string(raw)
	gomod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	require.NotNil(t, goVer)
	require.Contains(t, df, "FROM golang:"+string(goVer[1]), "the build image has the Go of go.mod")
	require.Contains(t, df, "./cmd/kvwarden")
	require.Contains(t, df, "EXPOSE 8000")
	require.Contains(t, df, `"--addr", "0.0.0.0:8000"`)
	require.True(t, bytes.Contains(raw, []byte("USER nonroot")))
}

func kvwardenSource(t *testing.T) string {
	var b strings.Builder
	for _, pattern := range []string{"../../cmd/kvwarden/*.go", "../../cmd/kvwarden/internal/cli/*.go"} {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			b.Write(raw)
		}
	}
	return b.String()
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
