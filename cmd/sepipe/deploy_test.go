package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// TestDeployManifest keeps deploy/kubernetes true to the binary: every
// CronJob runs a command and flags sepipe has, on a config (the ConfigMap)
// that loads for its tenant with only the variables of the tenant's
// Secret, and mounts the tenant's volume where its data goes; one more
// runs lake expire over every tenant's tables.
func TestDeployManifest(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under deploy/kubernetes: %v", err)
	}
	var objs []k8sObject
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(false)
		for {
			var o k8sObject
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, o)
		}
	}
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
			root := newRoot(&globals{stdout: io.Discard, stderr: io.Discard})
			cmd, rest, err := root.Find(c.Args)
			if err != nil || cmd == root {
				t.Fatalf("args %q: not a sepipe command (%v)", c.Args, err)
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Fatalf("args %q: %v", c.Args, err)
			}
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
