// Command phalanx-scheduler is kube-scheduler v1.36.3 with phalanx's framework plugin compiled in.
//
// It is the stock command (every flag, the configuration file, leader election) with one more plugin
// in its registry, as scheduler-plugins builds its own: a profile that enables PhalanxPlan places the
// pods phalanx's placement manager planned, with no extender round trip per pod. See
// docs/design/framework-sidecar.md.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // the JSON log format, as the stock command registers
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"phalanx.dev/sidecar/plan"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(plan.Name, plan.New))
	os.Exit(cli.Run(command))
}
