{{/*
Names and labels of the gharc-controller chart. The Deployment keeps ARC's discovery labels
(app.kubernetes.io/part-of: gha-rs-controller and actions.github.com/controller-*), so both
gharc's gharc-scale-set chart and ARC's gha-runner-scale-set chart find this controller's
service account when they bind their manager Role.
*/}}

{{- define "gharc-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gharc-controller.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "gharc-controller.fullname" -}}
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

{{- define "gharc-controller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gharc-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gharc-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gharc-controller.labels" -}}
helm.sh/chart: {{ include "gharc-controller.chart" . }}
{{ include "gharc-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gha-rs-controller
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- range $k, $v := .Values.labels }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{- define "gharc-controller.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{- define "gharc-controller.serviceAccountName" -}}
{{- if eq .Values.serviceAccount.name "default" }}
{{- fail "serviceAccount.name must not be \"default\": the controller needs its own service account for its RBAC bindings" }}
{{- end }}
{{- if .Values.serviceAccount.create }}
{{- default (include "gharc-controller.fullname" .) .Values.serviceAccount.name }}
{{- else if .Values.serviceAccount.name }}
{{- .Values.serviceAccount.name }}
{{- else }}
{{- fail "serviceAccount.name must name an existing service account when serviceAccount.create is false" }}
{{- end }}
{{- end }}

{{/* Leader election is on exactly when more than one replica runs. */}}
{{- define "gharc-controller.leaderElection" -}}
{{- if gt (int (default 1 .Values.replicaCount)) 1 }}true{{ end }}
{{- end }}

{{/* "0" and "" both mean "off" for a bind address, as in ARC. */}}
{{- define "gharc-controller.addrEnabled" -}}
{{- if and . (ne (toString .) "0") }}true{{ end }}
{{- end }}

{{- define "gharc-controller.port" -}}
{{- $port := regexFind "[0-9]+$" (toString .addr) }}
{{- if not $port }}
{{- fail (printf "%s must end with a numeric port, got %q" .name (toString .addr)) }}
{{- end }}
{{- $port }}
{{- end }}
