package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// k8sObject is the part of a Kubernetes object the deploy check reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		JobTemplate struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Args    []string `yaml:"args"`
							EnvFrom []struct {
								SecretRef struct {
									Name string `yaml:"name"`
								} `yaml:"secretRef"`
							} `yaml:"envFrom"`
							VolumeMounts []struct {
								Name      string `yaml:"name"`
								MountPath string `yaml:"mountPath"`
							} `yaml:"volumeMounts"`
						} `yaml:"containers"`
						Volumes []struct {
							Name      string `yaml:"name"`
							ConfigMap struct {
								Name string `yaml:"name"`
							} `yaml:"configMap"`
						} `yaml:"volumes"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"`
	} `yaml:"spec"`
}

// manifests decodes every object of deploy/kubernetes into T (the parts
// a test reads).
func manifests[T any](t *testing.T) []T {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under deploy/kubernetes: %v", err)
	}
	var objs []T
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o T
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

// commandOf is the sepipe command a container's args run, its flags
// parsed; the test fails when they are not a command sepipe has.
func commandOf(t *testing.T, args []string) *cobra.Command {
	t.Helper()
	root := newRoot(&globals{stdout: io.Discard, stderr: io.Discard})
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("args %q: not a sepipe command (%v)", args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	return cmd
}

// TestDeployManifest keeps deploy/kubernetes true to the binary: every
// CronJob runs a command and flags sepipe has, on a config (the ConfigMap)
// that loads for its tenant with only the variables of the tenant's
// Secret, and mounts the tenant's volume where its data goes; one more
// runs lake expire over every tenant's tables.
func TestDeployManifest(t *testing.T) {
	objs := manifests[k8sObject](t)
	byName := func(kind, name string) *k8sObject {
		for i := range objs {
			if objs[i].Kind == kind && objs[i].Metadata.Name == name {
				return &objs[i]
			}
		}
		t.Fatalf("no %s %q in deploy/kubernetes", kind, name)
		return nil
	}
	jobs, expires := 0, 0
	for _, o := range objs {
		if o.Kind != "CronJob" {
			continue
		}
		if args := o.Spec.JobTemplate.Spec.Template.Spec.Containers; len(args) == 1 && slices.Equal(args[0].Args[:min(2, len(args[0].Args))], []string{"lake", "expire"}) {
			expires++
		} else {
			jobs++
		}
		t.Run(o.Metadata.Name, func(t *testing.T) {
			cs := o.Spec.JobTemplate.Spec.Template.Spec.Containers
			if len(cs) != 1 {
				t.Fatalf("%d containers, want 1", len(cs))
			}
			c := cs[0]
			cmd := commandOf(t, c.Args)
			cfgPath, _ := cmd.Flags().GetString("config")
			tenant, _ := cmd.Flags().GetString("tenant")
			expire := cmd.CommandPath() == "sepipe lake expire"
			switch {
			case expire && (cfgPath == "" || tenant != ""):
				t.Fatalf("args %q: want --config and every tenant (no --tenant)", c.Args)
			case !expire && (cfgPath == "" || tenant == ""):
				t.Fatalf("args %q: want --config and --tenant", c.Args)
			}
			// The config file comes from a mounted ConfigMap.
			var configMap string
			for _, m := range c.VolumeMounts {
				if rel, err := filepath.Rel(m.MountPath, cfgPath); err == nil && filepath.IsLocal(rel) {
					for _, v := range o.Spec.JobTemplate.Spec.Template.Spec.Volumes {
						if v.Name == m.Name && v.ConfigMap.Name != "" {
							configMap = v.ConfigMap.Name
							cfgPath = rel
						}
					}
				}
			}
			if configMap == "" {
				t.Fatalf("--config %s is not in a mounted ConfigMap", cfgPath)
			}
			doc, ok := byName("ConfigMap", configMap).Data[cfgPath]
			if !ok {
				t.Fatalf("ConfigMap %s has no %s", configMap, cfgPath)
			}
			// Only the tenant's Secret sets variables.
			for _, v := range []string{"SEPIPE_ACCESS_TOKEN", "SEPIPE_API_TOKEN", "SEPIPE_OAUTH_CLIENT_ID", "SEPIPE_OAUTH_CLIENT_SECRET", "SEPIPE_REFRESH_TOKEN"} {
				t.Setenv(v, "")
				os.Unsetenv(v)
			}
			for _, e := range c.EnvFrom {
				for k, v := range byName("Secret", e.SecretRef.Name).StringData {
					t.Setenv(k, v)
				}
			}
			file := filepath.Join(t.TempDir(), "sepipe.yaml")
			if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			conf, err := LoadConfig(file, true)
			if expire {
				// The maintenance job: the lake of every tenant, an age
				// the command takes.
				if err == nil {
					err = conf.validateTenants()
				}
				if err == nil {
					err = conf.validateLake()
				}
				if err != nil {
					t.Fatalf("the ConfigMap's config for lake expire: %v", err)
				}
				if len(conf.Tenants) < 2 || conf.Output.Lake.Iceberg == nil {
					t.Fatalf("lake expire: want the tenants' shared Iceberg lake, got %d tenants, lake %+v", len(conf.Tenants), conf.Output.Lake.Iceberg)
				}
				older, _ := cmd.Flags().GetString("older-than")
				if age, err := ParseDuration(older); err != nil || age < 7*24*time.Hour {
					t.Fatalf("lake expire --older-than %q: want an age of days, longer than a run stays unsettled (%v)", older, err)
				}
				return
			}
			if err == nil {
				err = conf.UseTenant(tenant)
			}
			if err == nil {
				err = conf.Validate()
			}
			if err != nil {
				t.Fatalf("the ConfigMap's config for tenant %s: %v", tenant, err)
			}
			if o := conf.Service.OAuth; !o.ClientID.Set() || !o.ClientSecret.Set() || !o.RefreshToken.Set() {
				t.Errorf("tenant %s: the Secret leaves an OAuth credential unset (client id %v, secret %v, refresh token %v)",
					tenant, o.ClientID.Set(), o.ClientSecret.Set(), o.RefreshToken.Set())
			}
			if ic := conf.Output.Lake.Iceberg; ic == nil || ic.Namespace != tenant {
				t.Errorf("tenant %s: want its tables in the Iceberg namespace %q, got %+v", tenant, tenant, ic)
			}
			var mounts []string
			for _, m := range c.VolumeMounts {
				mounts = append(mounts, m.MountPath)
			}
			if !slices.Contains(mounts, conf.Output.Dir) {
				t.Errorf("tenant %s's data goes to %s, which no volume is mounted at (%q)", tenant, conf.Output.Dir, mounts)
			}
		})
	}
	if jobs < 2 || expires != 1 {
		t.Errorf("%d sync CronJobs and %d lake expire, want one per tenant (two in the example) and one to maintain the lake", jobs, expires)
	}
}

// k8sWorkload is the part of a Deployment the monitoring check reads.
type k8sWorkload struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []struct {
					Args  []string `yaml:"args"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
					ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
	Data map[string]string `yaml:"data"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"` // a number or a port's name
	} `yaml:"httpGet"`
}

// TestDeployMonitoring keeps the manifests' monitoring true to the binary
// (issue 42): each Deployment runs a long-lived sepipe command whose
// liveness and readiness probes ask /healthz and /readyz on the port its
// --metrics-addr serves, and whose scrape annotations name that port and
// /metrics; the sync CronJobs' config pushes to a Pushgateway sepipe
// accepts.
func TestDeployMonitoring(t *testing.T) {
	objs := manifests[k8sWorkload](t)
	deployments := 0
	for _, o := range objs {
		switch o.Kind {
		case "ConfigMap":
			file := filepath.Join(t.TempDir(), "sepipe.yaml")
			if err := os.WriteFile(file, []byte(o.Data["sepipe.yaml"]), 0o644); err != nil {
				t.Fatal(err)
			}
			conf, err := LoadConfig(file, true)
			if err != nil {
				t.Fatalf("ConfigMap %s: %v", o.Metadata.Name, err)
			}
			if conf.Metrics.Pushgateway == "" {
				t.Errorf("ConfigMap %s: no metrics.pushgateway: the syncs' metrics go nowhere", o.Metadata.Name)
			}
			cmd := newSyncCmd(&globals{stdout: io.Discard, stderr: io.Discard})
			var f metricsFlags
			if _, err := f.resolve(cmd, conf); err != nil {
				t.Errorf("ConfigMap %s: %v", o.Metadata.Name, err)
			}
		case "Deployment":
			deployments++
			t.Run(o.Metadata.Name, func(t *testing.T) {
				cs := o.Spec.Template.Spec.Containers
				if len(cs) != 1 {
					t.Fatalf("%d containers, want 1", len(cs))
				}
				c := cs[0]
				cmd := commandOf(t, c.Args)
				addr, err := cmd.Flags().GetString("metrics-addr")
				if err != nil || addr == "" {
					t.Fatalf("args %q: want --metrics-addr (the probes' and the scrape's port)", c.Args)
				}
				_, port, err := net.SplitHostPort(addr)
				if err != nil {
					t.Fatalf("--metrics-addr %q: %v", addr, err)
				}
				portOf := func(p any) string {
					for _, cp := range c.Ports {
						if cp.Name == fmt.Sprint(p) {
							return strconv.Itoa(cp.ContainerPort)
						}
					}
					return fmt.Sprint(p)
				}
				for _, pr := range []struct {
					what, path string
					probe      *k8sProbe
				}{{"livenessProbe", "/healthz", c.LivenessProbe}, {"readinessProbe", "/readyz", c.ReadinessProbe}} {
					if pr.probe == nil {
						t.Errorf("no %s", pr.what)
						continue
					}
					if pr.probe.HTTPGet.Path != pr.path || portOf(pr.probe.HTTPGet.Port) != port {
						t.Errorf("%s asks %s on port %s, want %s on %s", pr.what, pr.probe.HTTPGet.Path, portOf(pr.probe.HTTPGet.Port), pr.path, port)
					}
					if !slices.Contains(monitor.Paths, pr.path) {
						t.Errorf("%s: sepipe serves no %s", pr.what, pr.path)
					}
				}
				a := o.Spec.Template.Metadata.Annotations
				if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
					t.Errorf("scrape annotations %v, want scrape true, port %s, path /metrics", a, port)
				}
			})
		}
	}
	if deployments == 0 {
		t.Error("no Deployment of a long-lived command (listen) in deploy/kubernetes")
	}
}
