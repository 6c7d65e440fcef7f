// Command nullext is the bench's null scheduler extender in Go: filter passes every candidate, prioritize
// scores nothing, and nothing else is served. It is the floor of the extender protocol's cost in the
// fastest stack at hand (hack/perf/floor.py starts it); it decides nothing and is no part of phalanx.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
)

type extenderArgs struct {
	NodeNames *[]string `json:"NodeNames"`
}

type filterResult struct {
	Nodes                      *struct{}         `json:"Nodes"`
	NodeNames                  []string          `json:"NodeNames"`
	FailedNodes                map[string]string `json:"FailedNodes"`
	FailedAndUnresolvableNodes map[string]string `json:"FailedAndUnresolvableNodes"`
	Error                      string            `json:"Error"`
}

func filter(w http.ResponseWriter, r *http.Request) {
	var args extenderArgs
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	names := []string{}
	if args.NodeNames != nil {
		names = *args.NodeNames
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(filterResult{NodeNames: names, FailedNodes: map[string]string{},
		FailedAndUnresolvableNodes: map[string]string{}})
}

func prioritize(w http.ResponseWriter, r *http.Request) {
	var args extenderArgs
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("[]\n"))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", filter)
	mux.HandleFunc("POST /prioritize", prioritize)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	log.Fatal(http.ListenAndServe(*addr, mux))
}
