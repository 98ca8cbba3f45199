package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func unchanged(_, text string) string { return text }

func TestManifestsKeepTheRules(t *testing.T) {
	k, err := readKube(unchanged)
	require.NoError(t, err)
	assert.Len(t, k.deployments, 3, "room-service, gateway, redis")
	assert.Empty(t, k.check())

	c, dockerfiles, err := readCompose(unchanged)
	require.NoError(t, err)
	assert.Len(t, c.Services, 3)
	assert.Empty(t, c.check(dockerfiles))
}

// mutation edits one file's text; the rules must catch it.
type mutation struct {
	name, file, old, new string
	want                 string // part of the expected error
}

func (m mutation) edit(t *testing.T) func(name, text string) string {
	return func(name, text string) string {
		if name != m.file {
			return text
		}
		require.Contains(t, text, m.old, "the mutation must apply")
		return strings.Replace(text, m.old, m.new, 1)
	}
}

func TestKubeRulesCatchMutations(t *testing.T) {
	tests := []mutation{
		{"grace period without margin", "gateway.yaml", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 22", "terminationGracePeriodSeconds 22"},
		{"grace period left to default", "room-service.yaml", "      terminationGracePeriodSeconds: 40\n", "", "terminationGracePeriodSeconds 30"},
		{"delay shorter than probe notice", "room-service.yaml", "DRAIN_DELAY\n              value: 5s", "DRAIN_DELAY\n              value: 3s", "DRAIN_DELAY 3s is shorter than readiness periodSeconds 2 × failureThreshold 2"},
		{"probe slower than the delay", "gateway.yaml", "periodSeconds: 2\n            failureThreshold: 2", "periodSeconds: 5\n            failureThreshold: 2", "periodSeconds 5 × failureThreshold 2"},
		{"defaults slower than the delay", "gateway.yaml", "            periodSeconds: 2\n            failureThreshold: 2\n", "", "periodSeconds 10 × failureThreshold 3"},
		{"delay not shorter than timeout", "gateway.yaml", "DRAIN_DELAY\n              value: 5s", "DRAIN_DELAY\n              value: 20s", "not shorter than DRAIN_TIMEOUT"},
		{"unparsable timeout", "gateway.yaml", "value: 20s", "value: twenty", `DRAIN_TIMEOUT="twenty"`},
		{"request outlasts the drain", "gateway.yaml", "value: 14s", "value: 15s", "REQUEST_TIMEOUT 15s is not shorter than DRAIN_TIMEOUT 20s minus DRAIN_DELAY 5s"},
		{"request shorter than a lease", "gateway.yaml", "value: 14s", "value: 1s", "REQUEST_TIMEOUT 1s is not above room-service's LEASE_TTL 1s"},
		{"request timeout left to default", "gateway.yaml", "            - name: REQUEST_TIMEOUT\n              value: 14s\n", "", "REQUEST_TIMEOUT is not set"},
		{"ready timeout over probe timeout", "gateway.yaml", "value: 500ms", "value: 1s", "timeoutSeconds 1 does not exceed HEALTH_READY_TIMEOUT 1s"},
		{"liveness on the ready path", "gateway.yaml", "path: /healthz/live", "path: /healthz/ready", `liveness path "/healthz/ready"`},
		{"liveness over grpc health", "room-service.yaml", "livenessProbe:\n            httpGet:\n              path: /healthz/live\n              port: admin",
			"livenessProbe:\n            grpc:\n              port: 13001", "liveness is not httpGet"},
		{"no liveness", "gateway.yaml", "          livenessProbe:\n", "          xLivenessProbe:\n", "no livenessProbe"},
		{"grpc readiness for the whole server", "room-service.yaml", "service: room-service", `service: ""`, `readiness grpc service ""`},
		{"readiness on the wrong port", "room-service.yaml", "grpc:\n              port: 13001", "grpc:\n              port: 13002", "readiness grpc port 13002 is not the GRPC_ADDR port"},
		{"preStop sleep", "gateway.yaml", "          readinessProbe:", "          lifecycle:\n            preStop:\n              exec:\n                command: [sleep, \"5\"]\n          readinessProbe:", "preStop"},
		{"listen port not declared", "room-service.yaml", "value: :13002", "value: :13009", `ADMIN_ADDR=":13009": port 13009`},
		{"service targets a missing port", "room-service.yaml", "targetPort: 13002", "targetPort: 13003", "targetPort 13003"},
		{"service selects nothing", "gateway.yaml", "  selector:\n    app: gateway\n  ports:", "  selector:\n    app: gw\n  ports:", "matches no deployment"},
		{"backends on a ClusterIP", "room-service.yaml", "clusterIP: None", "clusterIP: \"\"", "not headless"},
		{"backends on the admin port", "gateway.yaml", "room-service-headless:13001", "room-service-headless:13002", "port 13002 is not the GRPC_ADDR port"},
		{"backends name no service", "gateway.yaml", "room-service-headless:13001", "rooms:13001", "names no Service"},
		{"redis url as a literal", "room-service.yaml", "- name: REDIS_URL\n              valueFrom:\n                secretKeyRef:\n                  name: redis-auth\n                  key: url",
			"- name: REDIS_URL\n              value: redis://default:s3cret@redis:6379", "REDIS_URL is not from a Secret"},
		{"no redis", "room-service.yaml", "- name: REDIS_URL\n", "- name: XREDIS_URL\n", "embedded in-memory Redis"},
		{"old redis variable", "room-service.yaml", "- name: REDIS_URL\n              valueFrom:", "- name: REDIS_ADDR\n              valueFrom:", "sets REDIS_ADDR"},
		{"roll faster than gateways re-resolve", "room-service.yaml", "minReadySeconds: 35", "minReadySeconds: 5", "minReadySeconds 5 is below 30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := readKube(tt.edit(t))
			require.NoError(t, err)
			errs := k.check()
			require.NotEmpty(t, errs, "got no error; want one containing %q", tt.want)
			assert.Contains(t, joined(errs), tt.want)
		})
	}
}

func TestComposeRulesCatchMutations(t *testing.T) {
	tests := []mutation{
		{"wget instead of curl", "docker-compose.yml", "curl -fsS http://127.0.0.1:13000/healthz/ready", "wget -qO- http://127.0.0.1:13000/healthz/ready", "want curl"},
		{"curl on the live path", "docker-compose.yml", "13000/healthz/ready", "13000/healthz/live", "want curl"},
		{"curl on the wrong port", "docker-compose.yml", "127.0.0.1:13000/healthz", "127.0.0.1:13001/healthz", "is not HTTP_ADDR"},
		{"grpc probe without service", "docker-compose.yml", " -service=room-service", "", "want grpc-health-probe"},
		{"grpc probe of another service", "docker-compose.yml", "-service=room-service", "-service=gateway-service", "is not SERVICE_NAME"},
		{"grpc probe on the admin port", "docker-compose.yml", "-addr=127.0.0.1:13001", "-addr=127.0.0.1:13002", "is not GRPC_ADDR"},
		{"fast interval", "docker-compose.yml", "interval: 5s", "interval: 1s", `interval "1s"`},
		{"few retries", "docker-compose.yml", "retries: 20", "retries: 3", `retries "3"`},
		{"start order without health", "docker-compose.yml", "condition: service_healthy", "condition: service_started", "service_started"},
		{"default stop grace", "docker-compose.yml", "    stop_grace_period: 40s\n", "", "stop_grace_period 10s"},
		{"stop grace without margin", "docker-compose.yml", "stop_grace_period: 30s", "stop_grace_period: 21s", "stop_grace_period 21s"},
		{"old redis variable", "docker-compose.yml", "REDIS_URL: redis://", "REDIS_ADDR: redis://", "sets REDIS_ADDR"},
		{"image without curl", "gateway.Dockerfile", "RUN apk add --no-cache curl && ", "RUN ", "does not install curl"},
		{"probe not copied", "room-service.Dockerfile", " /out/grpc-health-probe /usr", " /usr", "does not install grpc-health-probe"},
		{"probe unpinned", "room-service.Dockerfile", "grpc-health-probe@v0.4.62", "grpc-health-probe@latest", "does not install grpc-health-probe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, dockerfiles, err := readCompose(tt.edit(t))
			require.NoError(t, err)
			errs := c.check(dockerfiles)
			require.NotEmpty(t, errs, "got no error; want one containing %q", tt.want)
			assert.Contains(t, joined(errs), tt.want)
		})
	}
}

func joined(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}
