{{/*
The operator's arguments. The first four are those of manifests/manager/manager.yaml; a flag
whose value equals the operator's own default is left out, so the default render has exactly
those four and a reader sees only what a release changed. extraArgs come last: the operator takes
the last value of a repeated flag, so they can override any of ours.
*/}}
{{- define "database-operator.args" -}}
- run
{{- if .Values.leaderElection.enabled }}
- --leader-elect
{{- end }}
{{- if .Values.metrics.enabled }}
- --metrics-bind-address=:{{ .Values.metrics.port }}
{{- else }}
- --metrics-bind-address=0
{{- end }}
- --health-probe-bind-address=:{{ .Values.health.port }}
{{- if not .Values.metrics.secure }}
- --metrics-secure=false
{{- end }}
{{- with .Values.watchNamespaces }}
- --namespace={{ join "," . }}
{{- end }}
{{- if and .Values.leaderElection.enabled (ne .Values.leaderElection.id "database-operator.example.com") }}
- --leader-election-id={{ .Values.leaderElection.id }}
{{- end }}
{{- if ne (int .Values.workers) 2 }}
- --workers={{ .Values.workers }}
{{- end }}
{{- if ne (float64 .Values.kubeApiQps) 20.0 }}
- --kube-api-qps={{ .Values.kubeApiQps }}
{{- end }}
{{- if ne (int .Values.kubeApiBurst) 30 }}
- --kube-api-burst={{ .Values.kubeApiBurst }}
{{- end }}
{{- with .Values.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- with .Values.logFormat }}
- --log-format={{ . }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
