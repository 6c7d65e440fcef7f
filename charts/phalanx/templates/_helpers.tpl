{{/*
The elastic pool's settings the values set; none by default, so the placement manager keeps its own
defaults and the Deployment stays the one manifests/placement.yaml ships.
*/}}
{{- define "phalanx.elasticEnv" -}}
{{- $names := dict "cooldownSeconds" "PHALANX_ELASTIC_COOLDOWN_SECONDS" "growStep" "PHALANX_ELASTIC_GROW_STEP" "movesPerJob" "PHALANX_ELASTIC_MOVES_PER_JOB" "movesPerRound" "PHALANX_ELASTIC_MOVES_PER_ROUND" "pinTaintEffect" "PHALANX_PIN_TAINT_EFFECT" -}}
{{- range $key := keys $names | sortAlpha -}}
{{- $value := index $.Values.elasticPool $key -}}
{{- if not (kindIs "invalid" $value) }}
- {name: {{ index $names $key }}, value: {{ $value | toString | quote }}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Whether phalanx runs as the framework sidecar (scheduler.mode), after checking the mode is one of the
two and has what it needs: a typo must fail the install, not quietly install the other mode.
*/}}
{{- define "phalanx.sidecar" -}}
{{- $mode := .Values.scheduler.mode -}}
{{- if not (has $mode (list "extender" "sidecar")) -}}
{{- fail (printf "scheduler.mode must be extender or sidecar, got %v" $mode) -}}
{{- end -}}
{{- if and (eq $mode "sidecar") (not .Values.admissionGates.enabled) -}}
{{- fail "scheduler.mode sidecar needs admissionGates.enabled: the release pass writes the plans the sidecar follows" -}}
{{- end -}}
{{- if eq $mode "sidecar" }}true{{ end -}}
{{- end -}}
