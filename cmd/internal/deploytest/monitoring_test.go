package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// exportedMetrics returns the sendtwice_* metrics the executor and the task
// service export, each with its label names, as their own registrations
// make them (a scope past the label bound included, so that every label
// shows).
func exportedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	if _, err := metrics.NewExecutor(reg); err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterService(reg, func() (provider.Counts, bool) { return provider.Counts{}, true }); err != nil {
		t.Fatal(err)
	}
	scopes := []provider.ScopeCounts{{Scope: "a"}, {Scope: "b"}}
	if err := metrics.RegisterServiceScopes(reg, 1, func() (provider.KeyCounts, []provider.ScopeCounts, bool) {
		return provider.KeyCounts{}, scopes, true
	}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{
		// Exported once the consumer was read, which needs JetStream.
		metrics.ConsumerLag: nil,
	}
	for _, f := range families {
		var labels []string
		if len(f.GetMetric()) > 0 {
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		out[f.GetName()] = labels
		if f.GetType().String() == "HISTOGRAM" {
			out[f.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			out[f.GetName()+"_sum"] = labels
			out[f.GetName()+"_count"] = labels
		}
	}
	return out
}

// queries returns the PromQL expressions of deploy/: the alert rules and the
// Grafana dashboards' targets, each named by where it is.
func queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alerts.yml rule "+r.Alert+r.Record] = r.Expr
		}
	}
	dashboards, err := filepath.Glob(filepath.Join("..", "..", "..", "deploy", "grafana", "dashboards", "*.json"))
	if err != nil || len(dashboards) == 0 {
		t.Fatalf("no dashboards under deploy/grafana/dashboards: %v", err)
	}
	for _, file := range dashboards {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				ID      int    `json:"id"`
				Title   string `json:"title"`
				Targets []struct {
					RefID string `json:"refId"`
					Expr  string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d is used twice", file, p.ID)
			}
			ids[p.ID] = true
			for _, tg := range p.Targets {
				out[filepath.Base(file)+" panel "+p.Title+" "+tg.RefID] = tg.Expr
			}
		}
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\bsendtwice_[a-z_]+\b`)
	byLabels   = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
)

// The dashboards and the alert rules query only metrics the processes
// export, and group them only by labels those metrics have (or the
// target's, which Prometheus adds): a renamed metric or label would leave a
// panel empty or an alert silent.
func TestDashboardsAndAlertsQueryOnlyWhatTheProcessesExport(t *testing.T) {
	exported := exportedMetrics(t)
	qs := queries(t)
	if len(qs) < 10 {
		t.Fatalf("only %d queries found under deploy/; the check would prove little", len(qs))
	}
	for where, expr := range qs {
		t.Run(where+" queries exported metrics and labels", func(t *testing.T) {
			names := metricName.FindAllString(expr, -1)
			for _, n := range names {
				if _, ok := exported[n]; !ok {
					t.Errorf("%q names %s, which no process exports", expr, n)
				}
			}
			for _, m := range byLabels.FindAllStringSubmatch(expr, -1) {
				for _, label := range strings.Split(m[1], ",") {
					label = strings.TrimSpace(label)
					// Prometheus adds the scrape target's own.
					found := label == "instance" || label == "job"
					for _, n := range names {
						found = found || slices.Contains(exported[n], label)
					}
					if !found {
						t.Errorf("%q groups by %s, a label none of %v has", expr, label, names)
					}
				}
			}
		})
	}
}
