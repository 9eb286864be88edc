package proxyhealth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ServiceHealth is one ETP=Local LoadBalancer Service's health check on this node.
type ServiceHealth struct {
	Namespace, Name string
	Port            int32 // spec.healthCheckNodePort
	// LocalEndpoints counts the Service's ready endpoints on this node; terminating ones do not
	// count, so a node whose last local pod is going away is steered around (KEP-1669).
	LocalEndpoints int
}

// HealthCheckPorts serves each Service's healthCheckNodePort on every address of the node.
type HealthCheckPorts struct {
	// Tracker is the node's Service programming: a node whose rules are stale fails every
	// check (serviceProxyHealthy false), as kube-proxy's does.
	Tracker *Tracker
	// Listen opens a port (tests); nil listens on TCP :port.
	Listen func(port int32) (net.Listener, error)

	mu      sync.Mutex
	servers map[int32]*healthServer
}

type healthServer struct {
	srv *http.Server
	mu  sync.Mutex
	svc ServiceHealth
}

// Sync makes the node serve exactly svcs: a new port opens, a port no Service has any more
// closes, the others answer with the new counts. A port that cannot be opened (something else
// holds it) is an error naming it; the others are served all the same.
func (p *HealthCheckPorts) Sync(svcs []ServiceHealth) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.servers == nil {
		p.servers = map[int32]*healthServer{}
	}
	want := map[int32]ServiceHealth{}
	for _, s := range svcs {
		if s.Port > 0 {
			want[s.Port] = s
		}
	}
	for port, hs := range p.servers {
		if _, ok := want[port]; !ok {
			_ = hs.srv.Close()
			delete(p.servers, port)
		}
	}
	var errs []error
	for port, s := range want {
		if hs, ok := p.servers[port]; ok {
			hs.mu.Lock()
			hs.svc = s
			hs.mu.Unlock()
			continue
		}
		hs, err := p.open(port, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("health check node port %d of Service %s/%s: %w", port, s.Namespace, s.Name, err))
			continue
		}
		p.servers[port] = hs
	}
	return errors.Join(errs...)
}

// Close stops every health check server.
func (p *HealthCheckPorts) Close() {
	_ = p.Sync(nil)
}

func (p *HealthCheckPorts) open(port int32, s ServiceHealth) (*healthServer, error) {
	listen := p.Listen
	if listen == nil {
		listen = func(port int32) (net.Listener, error) { return net.Listen("tcp", ":"+strconv.Itoa(int(port))) }
	}
	l, err := listen(port)
	if err != nil {
		return nil, err
	}
	hs := &healthServer{svc: s}
	hs.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { p.answer(w, hs) }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.srv.Serve(l) }()
	return hs, nil
}

// healthCheckBody is kube-proxy's body for a health check node port.
type healthCheckBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// answer is 200 while this node has a ready endpoint of the Service and its rules are current,
// else 503; the count is also in X-Load-Balancing-Endpoint-Weight, as kube-proxy writes it.
func (p *HealthCheckPorts) answer(w http.ResponseWriter, hs *healthServer) {
	hs.mu.Lock()
	s := hs.svc
	hs.mu.Unlock()
	var body healthCheckBody
	body.Service.Namespace, body.Service.Name, body.LocalEndpoints = s.Namespace, s.Name, s.LocalEndpoints
	body.ServiceProxyHealthy = true
	if p.Tracker != nil {
		body.ServiceProxyHealthy, _, _ = p.Tracker.Healthy()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(s.LocalEndpoints))
	if s.LocalEndpoints == 0 || !body.ServiceProxyHealthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
