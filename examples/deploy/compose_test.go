package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The healthcheck timing the health-check guide prescribes for compose.
var guideHealthcheck = map[string]string{"interval": "5s", "timeout": "3s", "retries": "20", "start_period": "10s"}

type compose struct {
	Services map[string]struct {
		Build *struct {
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Environment     map[string]string `yaml:"environment"`
		StopGracePeriod string            `yaml:"stop_grace_period"`
		Healthcheck     *struct {
			Test        []string `yaml:"test"`
			Interval    string   `yaml:"interval"`
			Timeout     string   `yaml:"timeout"`
			Retries     string   `yaml:"retries"`
			StartPeriod string   `yaml:"start_period"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

// readCompose reads docker-compose.yml and the Dockerfiles it builds
// (by path relative to the repository root), applying edit to each text.
func readCompose(edit func(name, text string) string) (*compose, map[string]string, error) {
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		return nil, nil, err
	}
	var c compose
	if err := yaml.Unmarshal([]byte(edit("docker-compose.yml", string(b))), &c); err != nil {
		return nil, nil, err
	}
	dockerfiles := make(map[string]string)
	for _, s := range c.Services {
		if s.Build == nil {
			continue
		}
		name := filepath.Base(s.Build.Dockerfile)
		b, err := os.ReadFile(name) // the Dockerfiles live next to the compose file
		if err != nil {
			return nil, nil, fmt.Errorf("build.dockerfile %s: %w", s.Build.Dockerfile, err)
		}
		dockerfiles[s.Build.Dockerfile] = edit(name, string(b))
	}
	return &c, dockerfiles, nil
}

var (
	curlReady = regexp.MustCompile(`^curl -fsS http://127\.0\.0\.1:(\d+)/healthz/ready$`)
	grpcProbe = regexp.MustCompile(`^grpc-health-probe -addr=127\.0\.0\.1:(\d+) -service=(\S+)$`)
)

// check returns every rule docker-compose.yml and its Dockerfiles break.
func (c *compose) check(dockerfiles map[string]string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, s := range c.Services {
		hc := s.Healthcheck
		if hc == nil {
			bad("%s: no healthcheck", name)
			continue
		}
		got := map[string]string{"interval": hc.Interval, "timeout": hc.Timeout, "retries": hc.Retries, "start_period": hc.StartPeriod}
		for k, want := range guideHealthcheck {
			if got[k] != want {
				bad("%s: healthcheck %s %q; want %q (health-check guide)", name, k, got[k], want)
			}
		}
		for dep, d := range s.DependsOn {
			if d.Condition != "service_healthy" {
				bad("%s: depends_on %s condition %q; want service_healthy", name, dep, d.Condition)
			}
		}
		timeout, ok := s.Environment["DRAIN_TIMEOUT"]
		if !ok {
			continue // not a drainkit service (redis)
		}
		errs = append(errs, checkStopGrace(name, timeout, s.StopGracePeriod)...)
		if _, ok := s.Environment["REDIS_ADDR"]; ok {
			bad("%s: sets REDIS_ADDR, which room-service refuses: set REDIS_URL", name)
		}
		if _, leases := s.Environment["LEASE_TTL"]; leases && !slices.ContainsFunc(redisURLs, func(v string) bool { return s.Environment[v] != "" }) {
			bad("%s: takes leases but sets none of %v: it would run on an embedded in-memory Redis", name, redisURLs)
		}
		if len(hc.Test) != 2 || hc.Test[0] != "CMD-SHELL" {
			bad("%s: healthcheck test %q; want [CMD-SHELL, <command>]", name, hc.Test)
			continue
		}
		cmd, tool := hc.Test[1], ""
		httpAddr, isHTTP := s.Environment["HTTP_ADDR"]
		grpcAddr, isGRPC := s.Environment["GRPC_ADDR"]
		switch {
		case isHTTP:
			tool = "curl"
			if m := curlReady.FindStringSubmatch(cmd); m == nil {
				bad("%s: HTTP service healthcheck %q; want curl -fsS http://127.0.0.1:<port>/healthz/ready", name, cmd)
			} else if !strings.HasSuffix(httpAddr, ":"+m[1]) {
				bad("%s: healthcheck port %s is not HTTP_ADDR %q", name, m[1], httpAddr)
			}
		case isGRPC:
			tool = "grpc-health-probe"
			if m := grpcProbe.FindStringSubmatch(cmd); m == nil {
				bad("%s: gRPC service healthcheck %q; want grpc-health-probe -addr=127.0.0.1:<port> -service=<SERVICE_NAME>", name, cmd)
			} else {
				if !strings.HasSuffix(grpcAddr, ":"+m[1]) {
					bad("%s: healthcheck port %s is not GRPC_ADDR %q", name, m[1], grpcAddr)
				}
				if m[2] != s.Environment["SERVICE_NAME"] {
					bad("%s: healthcheck -service=%s is not SERVICE_NAME %q", name, m[2], s.Environment["SERVICE_NAME"])
				}
			}
		default:
			bad("%s: sets neither HTTP_ADDR nor GRPC_ADDR: cannot tell which healthcheck it needs", name)
			continue
		}
		if s.Build == nil {
			bad("%s: no build: cannot check its image carries %s", name, tool)
		} else if df := dockerfiles[s.Build.Dockerfile]; !imageHas(df, tool) {
			bad("%s: %s does not install %s, which its healthcheck runs", name, s.Build.Dockerfile, tool)
		}
	}
	return errs
}

func checkStopGrace(name, timeout, grace string) []error {
	t, err := time.ParseDuration(timeout)
	if err != nil {
		return []error{fmt.Errorf("%s: DRAIN_TIMEOUT=%q: %v", name, timeout, err)}
	}
	g := 10 * time.Second // compose's default
	if grace != "" {
		if g, err = time.ParseDuration(grace); err != nil {
			return []error{fmt.Errorf("%s: stop_grace_period %q: %v", name, grace, err)}
		}
	}
	if g < t+minGraceMargin {
		return []error{fmt.Errorf("%s: stop_grace_period %s does not cover DRAIN_TIMEOUT %s with %s margin: docker would SIGKILL the drain", name, g, t, minGraceMargin)}
	}
	return nil
}

// imageHas reports whether a Dockerfile puts tool in its final image: curl
// from the package manager, grpc-health-probe built in the build stage at
// the pinned version and copied over.
func imageHas(dockerfile, tool string) bool {
	final := dockerfile[strings.LastIndex(dockerfile, "\nFROM ")+1:]
	switch tool {
	case "curl":
		return regexp.MustCompile(`(?m)^RUN apk add --no-cache curl\b`).MatchString(final)
	case "grpc-health-probe":
		return strings.Contains(dockerfile, "go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.62") &&
			regexp.MustCompile(`(?m)^COPY --from=build .*/grpc-health-probe\b`).MatchString(final)
	}
	return false
}
