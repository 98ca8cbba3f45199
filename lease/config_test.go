package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/lifecycle"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string // substring of the error; "" for valid
	}{
		{"defaults", Config{Node: "n1"}, ""},
		{"empty node", Config{}, "Config.Node is empty"},
		{"node with separator", Config{Node: "a|b"}, `Config.Node "a|b"`},
		{"node with space", Config{Node: "a b"}, `Config.Node "a b"`},
		{"short TTL", Config{Node: "n", TTL: 500 * time.Millisecond}, "Config.TTL 500ms"},
		{"renew at TTL/2", Config{Node: "n", TTL: 10 * time.Second, RenewInterval: 5 * time.Second}, "Config.RenewInterval 5s"},
		{"call timeout above TTL/6", Config{Node: "n", CallTimeout: 2 * time.Second}, "Config.CallTimeout 2s"},
		{"prefix with brace", Config{Node: "n", RoutePrefix: "r{"}, `Config.RoutePrefix "r{"`},
		{"equal prefixes", Config{Node: "n", RoutePrefix: "x:", FencePrefix: "x:"}, "must differ"},
		{"negative WaitReplicas", Config{Node: "n", WaitReplicas: -1}, "Config.WaitReplicas -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"room-42", ""},
		{"", "empty"},
		{"a{b", "'{' or '}'"},
		{"a}b", "'{' or '}'"},
		{"a b", "whitespace"},
		{"a\tb", "whitespace"},
		{strings.Repeat("x", MaxIDLen), ""},
		{strings.Repeat("x", MaxIDLen+1), "129 bytes"},
	}
	for _, tt := range tests {
		err := validateID(tt.give)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validateID(%.20q) = %v; want error containing %q", tt.give, err, tt.want)
		}
	}
}

// TestBadIDTouchesNothing: a bad id is rejected before any command.
func TestBadIDTouchesNothing(t *testing.T) {
	b := standalone(t)
	var cmds int
	count := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		cmds++
		return next(ctx, cmd)
	}}
	m := startManager(t, b.client(count), testConfig())
	cmds = 0 // the renewer sends pipelines only (no tick within this test's time)
	for _, id := range []string{"", "{x}", "a b", strings.Repeat("x", 200)} {
		if _, err := m.Acquire(context.Background(), id); err == nil {
			t.Errorf("Acquire(%.20q): got nil error; want a validation error", id)
		}
		if _, err := m.Owner(context.Background(), id); err == nil {
			t.Errorf("Owner(%.20q): got nil error; want a validation error", id)
		}
	}
	if cmds != 0 {
		t.Fatalf("%d commands sent for bad ids; want 0", cmds)
	}
}

// A client as a team configures it, with go-redis's defaults, is refused
// in one error that names every option leases need changed, its value and
// the value wanted: not one option per failed start.
func TestNewListsEveryClientOptionLeasesNeed(t *testing.T) {
	cfg := Config{Node: "n"} // default TTL 10s: CallTimeout 1.666s
	tests := []struct {
		name   string
		client redis.UniversalClient
		want   []string // substrings of the one error; none for a client that fits
	}{
		{"go-redis defaults", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}),
			[]string{"*redis.Client options", "MaxRetries 3: want at most 1", "ContextTimeoutEnabled false with ReadTimeout 5s and WriteTimeout 5s",
				"want ContextTimeoutEnabled true", "at most 1.666s", "redis.Options{MaxRetries: 1, ContextTimeoutEnabled: true}"}},
		{"retries only", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}),
			[]string{"MaxRetries 3: want at most 1"}},
		{"slow reads without context deadlines", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ReadTimeout: 5 * time.Second, WriteTimeout: time.Second}),
			[]string{"ContextTimeoutEnabled false with ReadTimeout 5s:"}},
		{"no read timeout without context deadlines", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ReadTimeout: -1, WriteTimeout: time.Second}),
			[]string{"ContextTimeoutEnabled false with ReadTimeout unbounded"}},
		{"cluster defaults", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
			[]string{"*redis.ClusterClient options", "ContextTimeoutEnabled false with ReadTimeout 5s and WriteTimeout 5s", "redis.ClusterOptions{"}},
		{"cluster retries", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: 3, ContextTimeoutEnabled: true}),
			[]string{"MaxRetries 3"}},
		{"ring defaults", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}),
			[]string{"*redis.Ring options", "MaxRetries 3", "ContextTimeoutEnabled false"}},
		{"fit", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true}), nil},
		{"fit without retries", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true}), nil},
		{"fit without context deadlines", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ReadTimeout: time.Second, WriteTimeout: time.Second}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.client.Close()
			_, err := New(tt.client, cfg)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("New() = %v; want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New() = nil; want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New() = %v; want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("New() = %q; want one line", err)
			}
			if !errors.Is(err, lifecycle.ErrConfig) {
				t.Errorf("New() = %v; want it to match lifecycle.ErrConfig, so fxmodule.Run exits 78", err)
			}
		})
	}
}

// Every configuration New or Validate refuses is a configuration error,
// and an error that is not one does not match.
func TestConfigErrorsMatchErrConfig(t *testing.T) {
	fit := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true})
	defer fit.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, MaxRetries: 1, ContextTimeoutEnabled: true})
	defer ring.Close()
	reg := prometheus.NewRegistry()
	if _, err := New(fit, Config{Node: "n", Registerer: reg}); err != nil {
		t.Fatalf("New: %v", err)
	}
	tests := []struct {
		name   string
		client redis.UniversalClient
		cfg    Config
	}{
		{"no client", nil, Config{Node: "n"}},
		{"no node", fit, Config{}},
		{"short TTL", fit, Config{Node: "n", TTL: time.Millisecond}},
		{"WAIT on a Ring", ring, Config{Node: "n", WaitReplicas: 1}},
		{"RoutePrefix taken on the Registerer", fit, Config{Node: "n", Registerer: reg}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.client, tt.cfg)
			if !errors.Is(err, lifecycle.ErrConfig) {
				t.Errorf("New() = %v; want an error matching lifecycle.ErrConfig", err)
			}
		})
	}
	if err := (Config{}).Validate(); !errors.Is(err, lifecycle.ErrConfig) {
		t.Errorf("Validate() = %v; want an error matching lifecycle.ErrConfig", err)
	}
	if errors.Is(ErrDraining, lifecycle.ErrConfig) {
		t.Error("ErrDraining matches lifecycle.ErrConfig; want only configuration errors to")
	}
}

func TestProbe(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	if err := m.Probe(ctx); err != nil {
		t.Fatalf("Probe after Start: %v; want nil", err)
	}
	c.HSet(ctx, m.nodeKey(), "holder", "someone-else")
	if err := m.Probe(ctx); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("Probe with a foreign heartbeat: got %v; want 'another process'", err)
	}
	c.Del(ctx, m.nodeKey())
	if err := m.Probe(ctx); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Probe without heartbeat: got %v; want 'missing'", err)
	}
	c.HSet(ctx, m.nodeKey(), "holder", m.holder)
	c.PExpire(ctx, m.nodeKey(), m.cfg.TTL/4)
	if err := m.Probe(ctx); err == nil || !strings.Contains(err.Error(), "renewals are failing") {
		t.Fatalf("Probe with a stale heartbeat: got %v; want 'renewals are failing'", err)
	}
}
