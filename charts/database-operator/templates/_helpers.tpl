{{/*
Names and labels shared by every template.

With a release named database-operator, fullname is "database-operator", so the objects have the
names of manifests/ (tests/chart.rs compares the two renders).
*/}}

{{/* The chart's name, or nameOverride: the app.kubernetes.io/name label. */}}
{{- define "database-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name. 63 characters because some Kubernetes name fields are limited
to that (DNS labels); the release name alone when it already contains the chart's name, so that
`helm install database-operator` does not name things database-operator-database-operator.
*/}}
{{- define "database-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The helm.sh/chart label: a label value may not contain "+". */}}
{{- define "database-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Helm's labels: which release and chart made an object. manifests/ has none of them. */}}
{{- define "database-operator.helmLabels" -}}
helm.sh/chart: {{ include "database-operator.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels of an object: those of manifests/ (name, component) and Helm's.
Call with (dict "context" $ "component" "rbac").
*/}}
{{- define "database-operator.labels" -}}
app.kubernetes.io/name: {{ include "database-operator.name" .context }}
app.kubernetes.io/component: {{ .component }}
{{ include "database-operator.helmLabels" .context }}
{{- end }}

{{/*
What the Deployment selects its Pods by, and the metrics Service too. The instance keeps two
releases in one namespace from selecting each other's Pods.
*/}}
{{- define "database-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "database-operator.name" . }}
app.kubernetes.io/component: controller-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's ServiceAccount. */}}
{{- define "database-operator.serviceAccountName" -}}
{{- include "database-operator.fullname" . }}
{{- end }}

{{/* The operator's image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "database-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Whether /metrics is served over HTTPS with authentication, which needs the metrics-auth rules. */}}
{{- define "database-operator.secureMetrics" -}}
{{- if and .Values.metrics.enabled .Values.metrics.secure }}true{{ end }}
{{- end }}

{{/*
The metrics Service. A Service's name is a DNS label of at most 63 characters, which a long
release name would exceed with this suffix.
*/}}
{{- define "database-operator.metricsServiceName" -}}
{{- printf "%s-controller-manager-metrics-service" (include "database-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
